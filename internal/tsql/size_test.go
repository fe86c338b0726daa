package tsql

import (
	"strings"
	"testing"
)

func TestSourceQueriesNeverPasteTheName(t *testing.T) {
	name := "Sales'; DROP DATABASE x--]"
	q, args, err := SourceFacts(name)
	if err != nil || strings.Contains(q, "DROP") || len(args) != 1 || args[0] != name ||
		!strings.Contains(q, "DATABASEPROPERTYEX(@p1, 'Updateability')") || !strings.Contains(q, "SERVERPROPERTY('EngineEdition')") {
		t.Errorf("SourceFacts: %q %v %v, want the name as @p1 only", q, args, err)
	}
	q, args, err = DatabaseFiles(name)
	if err != nil || strings.Contains(q, "DROP") || len(args) != 1 || !strings.Contains(q, "sys.master_files WHERE database_id = DB_ID(@p1)") {
		t.Errorf("DatabaseFiles: %q %v %v", q, args, err)
	}
	q, err = DatabaseFilesInDatabase(name)
	if err != nil || !strings.Contains(q, "FROM [Sales'; DROP DATABASE x--]]].[sys].[database_files]") {
		t.Errorf("DatabaseFilesInDatabase: %q %v, want the name quoted as an identifier", q, err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 129)} {
		if _, _, err := SourceFacts(bad); err == nil {
			t.Errorf("SourceFacts(%q): no error", bad)
		}
		if _, err := DatabaseFilesInDatabase(bad); err == nil {
			t.Errorf("DatabaseFilesInDatabase(%q): no error", bad)
		}
	}
}
