package copier_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/backupcycle/backupcycle/internal/storage"
	"github.com/backupcycle/backupcycle/internal/storage/copier"
	"github.com/backupcycle/backupcycle/internal/storage/location"
)

// An activity copies the stripes of a backup set: it heartbeats the latest
// Progress of each file and, on retry, passes the heartbeat back as Resume.
func ExampleCopier_Copy() {
	ctx := context.Background()
	srcDir, _ := os.MkdirTemp("", "bak01-")
	dstDir, _ := os.MkdirTemp("", "bak02-")
	defer os.RemoveAll(srcDir)
	defer os.RemoveAll(dstDir)
	_ = os.WriteFile(filepath.Join(srcDir, "Sales_00000042_1of1.bak"), []byte("backup bytes"), 0o644)

	// smb://bak01:445/backup/sql with storage.Credentials resolved from a
	// reference in production; local directories here.
	src, _ := location.Open(ctx, "file://"+srcDir, storage.Credentials{})
	dst, _ := location.Open(ctx, dstDir, storage.Credentials{})

	heartbeat := map[string]copier.Progress{} // activity.RecordHeartbeat in an activity
	c := copier.New(copier.Options{Progress: func(p copier.Progress) { heartbeat[p.File] = p }})
	jobs := []copier.Job{{Src: "Sales_00000042_1of1.bak", Dst: "Sales_00000042_1of1.bak"}}
	for i := range jobs {
		if p, ok := heartbeat[jobs[i].Dst]; ok { // from activity.GetHeartbeatDetails on a retry
			jobs[i].Resume = &p
		}
	}
	res, err := c.Copy(ctx, src, dst, jobs)
	if err != nil {
		// storage.IsRetryable(err) decides: retry (resumes) or fail the cycle.
		fmt.Println("retryable:", storage.IsRetryable(err))
		return
	}
	fmt.Println(res[0].Dst, res[0].Size, res[0].SHA256[:16], heartbeat[res[0].Dst].Done)
	// Output: Sales_00000042_1of1.bak 12 7171b7ccbaa1ac37 true
}
