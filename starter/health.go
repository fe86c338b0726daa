package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/backupcycle/backupcycle/activities/health"
	"github.com/backupcycle/backupcycle/internal/preflight"
	"github.com/backupcycle/backupcycle/starter/client"
)

// healthJSON is `starter health --json`.
type healthJSON struct {
	WorkflowID string     `json:"workflow_id"`
	RunID      string     `json:"run_id"`
	Namespace  string     `json:"namespace"`
	TaskQueue  string     `json:"task_queue"`
	Worker     workerJSON `json:"worker"`
	// Site is the check of the configured instances and backup servers;
	// null when it was not run (SiteNote says why).
	Site     *preflight.Report `json:"site"`
	SiteNote string            `json:"site_note,omitempty"`
}

type workerJSON struct {
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Time      string `json:"time"`
	// ManifestAuthentication is how the worker signs and checks manifests
	// ("off": it does not); "" from an older worker.
	ManifestAuthentication string `json:"manifest_authentication,omitempty"`
}

func healthCommand(e *env) *cobra.Command {
	var asJSON, workerOnly bool
	cmd := &cobra.Command{
		Use:   "health",
		Short: "check what a cycle needs: a worker polls the task queue, and (with --config) every configured SQL instance and backup server answers",
		Long: `Checks what a cycle needs, in two parts:

  worker  starts the HealthCheck workflow and waits for a worker to run it: Temporal is reachable, a worker
          polls the task queue, the search attributes are registered;
  site    with --config: connects to every configured SQL instance and backup server from this machine with
          the configured credentials and checks the permissions a cycle needs (the checks of ` + "`starter preflight`" + `).

Without --config, or with --worker-only, it only proves that a worker polls: it says so, and a site that
cannot be reached fails only the first cycle. Exit 1 when either part fails.`,
		Args: noArgs,
		RunE: action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			c, hctx, done, err := e.session(ctx)
			if err != nil {
				return err
			}
			defer done()
			res, err := c.RunHealthCheck(hctx)
			if err != nil {
				return err
			}
			out := healthJSON{WorkflowID: res.WorkflowID, RunID: res.RunID, Namespace: c.Namespace(), TaskQueue: c.TaskQueue()}
			w := res.Result.Worker
			out.Worker = workerJSON{Host: w.Host, PID: w.PID, Version: w.Version, GoVersion: w.GoVersion, Time: rfc3339(w.Time),
				ManifestAuthentication: w.ManifestAuthentication}
			switch {
			case workerOnly:
				out.SiteNote = fmt.Sprintf("not checked (--worker-only): this only proves a worker polls task queue %s; `starter preflight` checks the SQL instances and backup servers", c.TaskQueue())
			case e.configFile == "":
				out.SiteNote = fmt.Sprintf("not checked: this only proves a worker polls task queue %s; give --config to check that the SQL instances and backup servers a cycle needs answer", c.TaskQueue())
			default:
				cfg, err := e.loadConfig()
				if err != nil {
					return err
				}
				sctx, cancel := e.withTimeout(ctx, defaultTimeout)
				defer cancel()
				out.Site, err = preflight.Run(sctx, preflight.Options{Config: cfg, CompressionFactor: client.DefaultCompressionFactor})
				if err != nil {
					return err
				}
			}
			if asJSON {
				if err := writeJSON(e.stdout, out); err != nil {
					return err
				}
			} else {
				writeHealth(e.stdout, out)
			}
			if out.Site != nil && !out.Site.OK {
				return fmt.Errorf("health: a worker polls, but a cycle would fail: %d check(s) of the configured instances and backup servers MISSING (above; `starter preflight` prints the fixes)", out.Site.Missing)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&workerOnly, "worker-only", false, "only check that a worker polls the task queue, not the SQL instances and backup servers of --config")
	jsonFlag(cmd, &asJSON, "print the result")
	return cmd
}

func writeHealth(w io.Writer, h healthJSON) {
	fmt.Fprintf(w, "worker:  health check %s completed (namespace %s, task queue %s)\n", h.WorkflowID, h.Namespace, h.TaskQueue)
	fmt.Fprintf(w, "  host=%s pid=%d version=%s go=%s time=%s\n", h.Worker.Host, h.Worker.PID, h.Worker.Version, h.Worker.GoVersion, h.Worker.Time)
	switch a := h.Worker.ManifestAuthentication; {
	case a == health.AuthenticationOff:
		fmt.Fprintln(w, "  WARNING manifests are not authenticated (no manifest_keys): anyone who can write a backup share can make a database look verified (README \"Authenticated manifests\")")
	case a != "":
		fmt.Fprintf(w, "  manifests: %s\n", a)
	}
	if h.Site == nil {
		fmt.Fprintf(w, "site:    %s\n", h.SiteNote)
		return
	}
	fmt.Fprintf(w, "site:    %s, checked from this machine with the credentials of %s\n", h.Site.Summary(), h.Site.Config)
	for _, c := range h.Site.Checks {
		if c.Status == preflight.OK {
			continue
		}
		where := c.Instance
		switch c.Kind {
		case preflight.KindDatabase:
			where = c.Instance + "/" + c.Database
		case preflight.KindServer:
			where = "backup server " + c.Server
		}
		fmt.Fprintf(w, "  %-8s %s: %s %s\n", c.Status, where, c.Name, c.Detail)
	}
}
