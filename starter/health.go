package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
)

func healthCmd(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := e.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	res, err := c.RunHealthCheck(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"workflow_id": res.WorkflowID, "run_id": res.RunID, "result": res.Result})
	}
	w := res.Result.Worker
	fmt.Fprintf(e.stdout, "health check %s completed (namespace %s, task queue %s)\n", res.WorkflowID, c.Namespace(), c.TaskQueue())
	fmt.Fprintf(e.stdout, "  worker: host=%s pid=%d version=%s go=%s\n", w.Host, w.PID, w.Version, w.GoVersion)
	fmt.Fprintf(e.stdout, "  time:   %s\n", w.Time.Format("2006-01-02T15:04:05.000Z07:00"))
	return nil
}
