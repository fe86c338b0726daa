package config

import (
	"os"
	"reflect"
	"regexp"
	"testing"
	"time"
)

const examplePath = "../../config.example.yaml"

func TestExampleConfig(t *testing.T) {
	c, err := Load(examplePath)
	if err != nil {
		t.Fatalf("config.example.yaml does not load:\n%v", err)
	}
	if len(c.SQLInstances) != 2 || len(c.BackupServers) != 2 || len(c.Databases) != 1 {
		t.Fatalf("example: %d instances, %d servers, %d databases", len(c.SQLInstances), len(c.BackupServers), len(c.Databases))
	}
	for _, b := range c.BackupServers {
		if len(b.UNCPaths) != 2 || b.Loc.Scheme != "smb" || b.VerifyInstance == "" {
			t.Errorf("%s: want two NIC paths, an smb location and a verify instance: %+v", b.Name, b)
		}
	}
	db := c.Databases[0]
	if db.Name != "Sales" || db.Stripes != 8 || db.BufferCount != 64 || db.MaxTransferSize != 4<<20 {
		t.Errorf("Sales: %+v", db)
	}
	if db.Retention != (Retention{KeepVerified: 3, DeleteFailedAfter: 72 * time.Hour}) {
		t.Errorf("Sales retention (own keep_verified, inherited delete_failed_after): %+v", db.Retention)
	}
	if len(db.SanityChecks) != 3 {
		t.Errorf("sanity checks: %+v", db.SanityChecks)
	}
}

// Every key of the schema is shown (set or commented) in the example.
func TestExampleDocumentsEveryKey(t *testing.T) {
	text, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(tp reflect.Type) {
		for tp.Kind() == reflect.Pointer || tp.Kind() == reflect.Slice {
			tp = tp.Elem()
		}
		if tp.Kind() != reflect.Struct || tp == durationType || seen[tp] {
			return
		}
		seen[tp] = true
		fs, names := fields(tp)
		for _, n := range names {
			if !regexp.MustCompile(`(?m)(^|[\s{,#-])` + regexp.QuoteMeta(n) + `:`).Match(text) {
				t.Errorf("config.example.yaml does not show key %q (of %s)", n, tp.Name())
			}
			walk(tp.FieldByIndex(fs[n].index).Type)
		}
	}
	walk(reflect.TypeOf(Config{}))
	if len(seen) < 8 {
		t.Fatalf("walked only %d types", len(seen))
	}
}

func BenchmarkParseExample(b *testing.B) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "config.example.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
