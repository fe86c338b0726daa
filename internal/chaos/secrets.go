package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
)

// I6: the product never writes a configured secret where others read it.

// redact replaces every configured password in s.
func (c *Checker) redact(s string) string {
	for _, p := range c.f.Secrets() {
		s = strings.ReplaceAll(s, p, "<password>")
	}
	return s
}

// secretIn returns the environment variable whose password b contains, or "".
func (c *Checker) secretIn(b []byte) string {
	for env, p := range c.f.passwords {
		if bytes.Contains(b, []byte(p)) {
			return env
		}
	}
	return ""
}

// I6: no workflow history, worker log line, manifest or workflow error
// contains a configured password.
func (c *Checker) checkI6(ctx context.Context, files []manifestFile, errs []string, add addFunc) Notes {
	var notes Notes
	for _, e := range errs {
		if env := c.secretIn([]byte(e)); env != "" {
			add(6, "error|"+env+"|"+c.redact(e), "the password of %s is in a workflow error: %s", env, e)
		}
	}
	for _, mf := range files {
		if env := c.secretIn(mf.Raw); env != "" {
			add(6, "manifest|"+env+"|"+mf.Server+"/"+mf.File, "the password of %s is in manifest %s/%s", env, mf.Server, mf.File)
		}
	}
	for _, path := range c.f.WorkerLogs() {
		if n := c.scanLog(path, add); n != "" {
			notes = append(notes, n)
		}
	}
	if n := c.scanHistories(ctx, add); n != "" {
		notes = append(notes, n)
	}
	return notes
}

func (c *Checker) scanLog(path string, add addFunc) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("I6: cannot read %s: %v", path, err)
	}
	defer f.Close()
	off := c.logOffsets[path]
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Sprintf("I6: %s: %v", path, err)
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			off += int64(len(line))
			c.reportedIn(line)
			if panicLine(line) {
				add(14, "panic|"+filepath.Base(path)+"|"+fmt.Sprint(off), "a worker crashed: %s: %s", filepath.Base(path), strings.TrimSpace(string(line)))
			}
			if env := c.secretIn(line); env != "" {
				add(6, "log|"+env+"|"+filepath.Base(path)+"|"+fmt.Sprint(off), "the password of %s is in %s: %s",
					env, filepath.Base(path), strings.TrimSpace(string(line)))
			}
		}
		if err != nil {
			break // a partial last line is read again next time
		}
	}
	c.logOffsets[path] = off
	return ""
}

// scanHistories reads the history of every workflow run not read before
// (closed runs once; running ones every time).
func (c *Checker) scanHistories(ctx context.Context, add addFunc) string {
	cl := c.f.Client()
	if cl == nil {
		return "I6: Temporal is down, histories not read"
	}
	var token []byte
	for page := 0; page < 1000; page++ {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := cl.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 200, NextPageToken: token})
		cancel()
		if err != nil {
			return fmt.Sprintf("I6: list workflows: %v", err)
		}
		for _, e := range resp.GetExecutions() {
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			key := id + "/" + run
			if c.scanned[key] {
				continue
			}
			closed := e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
			it := cl.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			complete := true
			for n := 0; it.HasNext() && n < 100000; n++ {
				ev, err := it.Next()
				if err != nil {
					complete = false
					break
				}
				b, err := proto.Marshal(ev)
				if err != nil {
					continue
				}
				if env := c.secretIn(b); env != "" {
					add(6, "history|"+env+"|"+key, "the password of %s is in the history of workflow %s (run %s), event %d %s",
						env, id, run, ev.GetEventId(), ev.GetEventType())
				}
			}
			if closed && complete {
				c.scanned[key] = true
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return ""
		}
	}
	return "I6: more than 1000 pages of workflows"
}
