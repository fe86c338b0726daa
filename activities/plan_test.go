package activities

import (
	"strings"
	"testing"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/plan"
)

func TestBackupModeFollowsTheSource(t *testing.T) {
	owned := &config.Database{Name: "Sales", Instance: "sql01",
		Policy: config.Policy{Compression: true, CopyOnly: false, OwnsBackupChain: true, Sequence: config.SequenceTable}}
	for _, tc := range []struct {
		name     string
		db       *config.Database
		src      SourceFacts
		want     BackupMode
		warnings []string // substrings, one per warning
	}{
		{"enterprise, read-write", owned, SourceFacts{Read: true, EngineEdition: 3, Edition: "Enterprise Edition (64-bit)", Updateability: "READ_WRITE"},
			BackupMode{Compression: true, CopyOnly: false, Sequence: config.SequenceTable}, nil},
		{"express", owned, SourceFacts{Read: true, EngineEdition: 4, Edition: "Express Edition (64-bit)", Updateability: "READ_WRITE"},
			BackupMode{Compression: false, CopyOnly: false, Sequence: config.SequenceTable}, []string{"Express Edition"}},
		{"web", owned, SourceFacts{Read: true, EngineEdition: 2, Edition: "Web Edition (64-bit)", Updateability: "READ_WRITE"},
			BackupMode{Compression: false, CopyOnly: false, Sequence: config.SequenceTable}, []string{"Web Edition"}},
		{"read-only standard", owned, SourceFacts{Read: true, EngineEdition: 2, Edition: "Standard Edition (64-bit)", Updateability: "READ_ONLY"},
			BackupMode{Compression: true, CopyOnly: true, Sequence: config.SequenceCatalog}, []string{"WITH COPY_ONLY", "sequence: catalog"}},
		{"read-only, utc sequence kept", &config.Database{Name: "Sales", Instance: "sql01",
			Policy: config.Policy{Compression: true, CopyOnly: true, Sequence: config.SequenceUTC}},
			SourceFacts{Read: true, EngineEdition: 3, Updateability: "read_only"},
			BackupMode{Compression: true, CopyOnly: true, Sequence: config.SequenceUTC}, nil},
		{"not read", owned, SourceFacts{},
			BackupMode{Compression: true, CopyOnly: false, Sequence: config.SequenceTable}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := backupMode(tc.db, tc.src)
			if got != tc.want || len(warnings) != len(tc.warnings) {
				t.Fatalf("backupMode = %+v %q, want %+v with %d warnings", got, warnings, tc.want, len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q does not mention %q", warnings[i], w)
				}
			}
		})
	}
}

func TestAutoStripesUsesTheSizeWithinTheBudget(t *testing.T) {
	db := &config.Database{Policy: config.Policy{MemoryBudget: 2 << 30}}
	if n, _ := autoStripes(10<<30, 2, db); n != 4 {
		t.Errorf("10 GiB on 2 NIC paths: %d stripes, want 4 (2 per NIC)", n)
	}
	if n, _ := autoStripes(2<<40, 2, db); n != 8 {
		t.Errorf("2 TiB on 2 NIC paths: %d stripes, want 8 (4 per NIC)", n)
	}
	// 64 buffers of 4 MiB: 256 MiB per BACKUP whatever the stripes; a
	// budget for the default BUFFERCOUNT of 6 stripes only.
	tight := &config.Database{Policy: config.Policy{MemoryBudget: config.Size(plan.BackupMemory(plan.Tuning{Stripes: 6}, 1))}}
	if n, _ := autoStripes(2<<40, 2, tight); n != 6 {
		t.Errorf("2 TiB on 2 NIC paths in a budget for 6 stripes: %d, want 6", n)
	}
}

func TestRunModeOfAPlanWithoutMode(t *testing.T) {
	if m := (Plan{}).RunMode(); m != nil {
		t.Errorf("a plan without a mode gives %+v, want nil (the configuration's)", m)
	}
	p := Plan{Mode: BackupMode{CopyOnly: true, Sequence: config.SequenceCatalog}}
	if m := p.RunMode(); m == nil || *m != p.Mode {
		t.Errorf("RunMode = %v, want %+v", m, p.Mode)
	}
}
