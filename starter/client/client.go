// Package client is the one place that dials Temporal for backupcycle and
// starts its workflows. The starter command, the worker and other services
// use it instead of repeating addresses, task queues, workflow names and
// search attributes.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/backupcycle/backupcycle/internal/config"
	"github.com/backupcycle/backupcycle/internal/logging"
	"github.com/backupcycle/backupcycle/workflows"
)

// Defaults for empty fields of config.Temporal (config.Load fills them too;
// callers that build a config.Temporal by hand get the same).
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
	// DefaultDialTimeout keeps a command from hanging on a dead address.
	DefaultDialTimeout = 5 * time.Second
)

// Client is a connected Temporal client bound to a namespace and task queue.
type Client struct {
	sdk       sdkclient.Client
	namespace string
	taskQueue string
	address   string
	log       *zap.Logger
	owned     bool
}

// WithDefaults fills the empty fields of t.
func WithDefaults(t config.Temporal) config.Temporal {
	if t.Address == "" {
		t.Address = DefaultAddress
	}
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	if t.TaskQueue == "" {
		t.TaskQueue = workflows.TaskQueue
	}
	return t
}

// Options builds the SDK client options for t: TLS / mTLS from files and the
// API key from the environment variable t names. Secrets are read here and
// never logged or put in an error.
func Options(t config.Temporal, log *zap.Logger) (sdkclient.Options, error) {
	t = WithDefaults(t)
	if log == nil {
		log = zap.NewNop()
	}
	opts := sdkclient.Options{
		HostPort:  t.Address,
		Namespace: t.Namespace,
		Logger:    logging.NewSDKLogger(log),
	}
	if t.TLS != nil {
		tc, err := tlsConfig(t.TLS)
		if err != nil {
			return opts, err
		}
		opts.ConnectionOptions.TLS = tc
	}
	if t.APIKeyEnv != "" {
		key := strings.TrimSpace(os.Getenv(t.APIKeyEnv))
		if key == "" {
			return opts, fmt.Errorf("temporal.api_key_env names %s, but %s is empty or unset: export %s=<API key> in the environment of this process",
				t.APIKeyEnv, t.APIKeyEnv, t.APIKeyEnv)
		}
		// The SDK turns TLS on by itself when an API key is set.
		opts.Credentials = sdkclient.NewAPIKeyStaticCredentials(key)
	}
	return opts, nil
}

func tlsConfig(t *config.TLS) (*tls.Config, error) {
	tc := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal.tls.ca_file %s holds no PEM certificate: give the CA that signed the frontend's certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, errors.New("temporal.tls: cert_file and key_file go together (mTLS client certificate): set both or neither")
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls: client certificate %s / key %s: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// UnreachableError says that no Temporal frontend answered at Address.
type UnreachableError struct {
	Address string
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach Temporal at %s: %v (is a Temporal server running there? For a try-out, `make demo KEEP=1` starts one)", e.Address, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Dial connects to the cluster t describes and checks it answers, giving up
// after DefaultDialTimeout (or ctx's deadline if sooner). Each of configure
// may set more SDK options (the worker's MetricsHandler).
func Dial(ctx context.Context, t config.Temporal, log *zap.Logger, configure ...func(*sdkclient.Options)) (*Client, error) {
	t = WithDefaults(t)
	opts, err := Options(t, log)
	if err != nil {
		return nil, err
	}
	for _, f := range configure {
		f(&opts)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultDialTimeout)
	defer cancel()
	c, err := sdkclient.DialContext(ctx, opts)
	if err != nil {
		return nil, &UnreachableError{Address: t.Address, Err: shortErr(err)}
	}
	cl := New(c, t, log)
	cl.owned = true
	return cl, nil
}

// New wraps an SDK client that is already connected (e.g. to the embedded
// devserver); Close then leaves it open.
func New(c sdkclient.Client, t config.Temporal, log *zap.Logger) *Client {
	t = WithDefaults(t)
	if log == nil {
		log = zap.NewNop()
	}
	return &Client{sdk: c, namespace: t.Namespace, taskQueue: t.TaskQueue, address: t.Address, log: log}
}

// SDK is the underlying Temporal client (workers, schedules, raw calls).
func (c *Client) SDK() sdkclient.Client { return c.sdk }

// Namespace the client works in.
func (c *Client) Namespace() string { return c.namespace }

// TaskQueue workflows are started on.
func (c *Client) TaskQueue() string { return c.taskQueue }

// Address of the frontend.
func (c *Client) Address() string { return c.address }

// Close closes the connection if Dial opened it.
func (c *Client) Close() {
	if c.owned {
		c.sdk.Close()
	}
}

// HealthCheckRun is a finished health-check workflow.
type HealthCheckRun struct {
	WorkflowID string
	RunID      string
	Result     workflows.HealthResult
}

// RunHealthCheck starts the HealthCheck workflow and waits for its result.
// ctx bounds the wait: without a worker polling the task queue it would
// never finish, and the error then says so.
func (c *Client) RunHealthCheck(ctx context.Context) (HealthCheckRun, error) {
	id := fmt.Sprintf("health-%s", time.Now().UTC().Format("20060102T150405.000000000Z"))
	run, err := c.sdk.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:        id,
		TaskQueue: c.taskQueue,
		// A health check that cannot finish in a minute is itself the answer.
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            "backupcycle health check",
	}, workflows.HealthCheckName)
	if err != nil {
		return HealthCheckRun{}, fmt.Errorf("start %s workflow on namespace %q: %w", workflows.HealthCheckName, c.namespace, err)
	}
	out := HealthCheckRun{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	c.log.Info("health check started", zap.String(logging.KeyWorkflowID, out.WorkflowID), zap.String(logging.KeyRunID, out.RunID))
	if err := run.Get(ctx, &out.Result); err != nil {
		// The long poll's own gRPC deadline can fire a moment before ctx's
		// timer: both mean "nobody ran it in time".
		var dl *serviceerror.DeadlineExceeded
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &dl) {
			cause := ctx.Err()
			if cause == nil {
				cause = context.DeadlineExceeded
			}
			return out, fmt.Errorf("health check %s did not finish: %w (is a worker polling task queue %q on namespace %q?)",
				out.WorkflowID, cause, c.taskQueue, c.namespace)
		}
		return out, fmt.Errorf("health check %s failed: %w", out.WorkflowID, err)
	}
	return out, nil
}

// MissingSearchAttributesError lists the custom search attributes a
// namespace lacks for these workflows, and how to add them.
type MissingSearchAttributesError struct {
	Namespace string
	Missing   map[string]enumspb.IndexedValueType
	// Wrong holds attributes that exist with another type.
	Wrong map[string]enumspb.IndexedValueType
}

func (e *MissingSearchAttributesError) Error() string {
	var parts, cmds []string
	for _, name := range sortedKeys(e.Missing) {
		parts = append(parts, fmt.Sprintf("%s (%s)", name, typeName(e.Missing[name])))
		cmds = append(cmds, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s",
			e.Namespace, name, typeName(e.Missing[name])))
	}
	msg := ""
	if len(parts) > 0 {
		msg = fmt.Sprintf("namespace %q lacks search attributes %s: add them with `%s`",
			e.Namespace, strings.Join(parts, ", "), strings.Join(cmds, " && "))
	}
	for _, name := range sortedKeys(e.Wrong) {
		if msg != "" {
			msg += "; "
		}
		msg += fmt.Sprintf("search attribute %s on namespace %q has type %s, backupcycle needs %s: remove and re-create it, or use another namespace",
			name, e.Namespace, typeName(e.Wrong[name]), typeName(workflows.SearchAttributeTypes[name]))
	}
	return msg
}

// CheckSearchAttributes verifies that the namespace has every custom search
// attribute in workflows.SearchAttributeTypes with the right type. It
// returns *MissingSearchAttributesError when not.
func (c *Client) CheckSearchAttributes(ctx context.Context) error {
	resp, err := c.sdk.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: c.namespace})
	if err != nil {
		var denied *serviceerror.PermissionDenied
		if errors.As(err, &denied) {
			return fmt.Errorf("list search attributes of namespace %q: %w (the credentials need operator read access)", c.namespace, err)
		}
		return fmt.Errorf("list search attributes of namespace %q: %w", c.namespace, err)
	}
	e := &MissingSearchAttributesError{Namespace: c.namespace,
		Missing: map[string]enumspb.IndexedValueType{}, Wrong: map[string]enumspb.IndexedValueType{}}
	for name, want := range workflows.SearchAttributeTypes {
		got, ok := resp.GetCustomAttributes()[name]
		switch {
		case !ok:
			e.Missing[name] = want
		case got != want:
			e.Wrong[name] = got
		}
	}
	if len(e.Missing) > 0 || len(e.Wrong) > 0 {
		return e
	}
	return nil
}

// typeName is the type as the Temporal CLI spells it (Keyword, Int,
// KeywordList): the API's enums print that way.
func typeName(t enumspb.IndexedValueType) string { return t.String() }

func sortedKeys(m map[string]enumspb.IndexedValueType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// shortErr drops the gRPC noise around a connection failure, keeping the
// innermost message (e.g. "connection refused") when there is one.
func shortErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", DefaultDialTimeout, err)
	}
	const marker = "Error while dialing: "
	if msg := err.Error(); strings.Contains(msg, marker) {
		inner := msg[strings.Index(msg, marker)+len(marker):]
		return &dialError{msg: strings.TrimRight(inner, `"`), err: err}
	}
	return err
}

// dialError shows the short message but keeps the SDK's error for errors.As.
type dialError struct {
	msg string
	err error
}

func (e *dialError) Error() string { return e.msg }
func (e *dialError) Unwrap() error { return e.err }
