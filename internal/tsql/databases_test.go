package tsql

import (
	"strings"
	"testing"
)

// The selection reads these columns by name; dropping one would silently
// select snapshots or offline databases.
func TestDatabasesQueryColumns(t *testing.T) {
	for _, c := range []string{"name", "database_id", "state_desc", "source_database_id", "is_read_only"} {
		if !strings.Contains(DatabasesQuery, c) {
			t.Errorf("DatabasesQuery lacks column %s: %s", c, DatabasesQuery)
		}
	}
	if !strings.Contains(DatabasesQuery, "FROM sys.databases") {
		t.Errorf("DatabasesQuery does not read sys.databases: %s", DatabasesQuery)
	}
}
