package config

import (
	"strings"
	"testing"
	"time"
)

func TestObjectivesInheritAndValidate(t *testing.T) {
	c, err := Parse([]byte(base), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Databases[0].RPO != DefaultRPO || c.Databases[0].RTO != 0 {
		t.Fatalf("built-in objectives: rpo %s rto %s, want 26h and none", c.Databases[0].RPO, c.Databases[0].RTO)
	}

	withDefaults := "defaults:\n  rpo: 2d\n  rto: 4h\n" + base + "    rto: 90m\n"
	c, err = Parse([]byte(withDefaults), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db := c.Databases[0]; db.RPO != 48*time.Hour || db.RTO != 90*time.Minute {
		t.Fatalf("inherited rpo %s (want 48h), own rto %s (want 90m)", db.RPO, db.RTO)
	}

	for _, tc := range []struct{ yaml, msg string }{
		{base + "    rpo: 0s\n", "config.yaml:28: databases[0] (Sales): rpo must be positive"},
		{base + "    rto: -1h\n", "rto must not be negative"},
		{"defaults:\n  rpo: 0s\n" + base, "defaults: rpo must be positive"},
	} {
		_, err := Parse([]byte(tc.yaml), "config.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("want an error containing %q, got %v", tc.msg, err)
		}
	}
}
