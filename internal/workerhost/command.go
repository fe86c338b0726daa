package workerhost

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/backupcycle/backupcycle/internal/version"
)

// Exit codes of the worker commands: 0 stopped cleanly, 1 failed, 2 bad
// usage.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// ParseArgs is what every worker command does first: parse args into fs
// (--help exits 0, a bad flag 2), print "<name> <version>" for --version
// (showVersion), then check the options (its error exits 2 as "<name>:
// error"). done says the command ends here with code.
func ParseArgs(fs *flag.FlagSet, args []string, name string, showVersion *bool, check func() error,
	stdout, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, true
		}
		return ExitUsage, true
	}
	if *showVersion {
		fmt.Fprintf(stdout, "%s %s\n", name, version.String())
		return ExitOK, true
	}
	if err := check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage, true
	}
	return ExitOK, false
}
