package sqlsim

import (
	"fmt"
	"testing"
)

// TestCrashReleasesBackupFiles: a BACKUP cut by a crash gives its files
// back before the instance starts again, as the files of a dead process are
// closed with it; the first BACKUP after the restart onto the same files
// must not meet 3201 with OS error 32 from its own dead predecessor.
func TestCrashReleasesBackupFiles(t *testing.T) {
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 16 << 20})
	for i := range 20 {
		e.in.SetThrottle(16 << 20)
		if err := e.in.CrashAt(OpBackup, 40); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d", i)
		paths := stripeNames("Sales", 2)
		if _, err := run(testCtx(t), e.open(t, "master"), nil, "BACKUP DATABASE [Sales] TO "+disks(paths)+" WITH INIT, FORMAT, STATS = 10"); err == nil {
			t.Fatalf("round %d: a backup through a crash succeeded", i)
		}
		if err := e.in.Start(); err != nil {
			t.Fatal(err)
		}
		e.in.devices.mu.Lock()
		held := fmt.Sprint(e.in.devices.open)
		n := len(e.in.devices.open)
		e.in.devices.mu.Unlock()
		if n != 0 {
			t.Fatalf("round %d: files still held after the restart: %s", i, held)
		}
	}
}
