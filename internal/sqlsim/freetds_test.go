package sqlsim

import (
	"context"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestFreeTDSClient talks to the emulator with a TDS client that shares no
// code with go-mssqldb or with the emulator: FreeTDS's tsql, at every TDS
// version a SQL Server 2016-2022 accepts (7.1 to 7.4) and at "auto". A
// down-level client must get what SQL Server sends it: the version it asked
// for in LOGINACK, 4-byte DONE row counts and USHORT message line numbers
// before 7.2, datetime2 as an nvarchar literal before 7.3, nvarchar(max) as
// ntext before 7.2. Any of these wrong makes tsql lose the token stream.
func TestFreeTDSClient(t *testing.T) {
	tsql, err := exec.LookPath("tsql")
	if err != nil {
		t.Fatal("FreeTDS's tsql is not installed: run `make test-deps` (Debian package freetds-bin)")
	}
	e := newEnv(t)
	e.create(t, DatabaseSpec{Name: "Sales", Size: 8 << 20})
	host, port, err := net.SplitHostPort(e.in.Addr())
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"SELECT SYSDATETIME() AS now2, CAST(N'xyz' AS nvarchar(max)) AS m, CAST(NULL AS nvarchar(max)) AS n, 42 AS i",
		"BACKUP DATABASE [Sales] TO DISK = N'\\\\bak01\\backup\\freetds.bak' WITH INIT, FORMAT, CHECKSUM, STATS = 50",
		"RESTORE VERIFYONLY FROM DISK = N'\\\\bak01\\backup\\freetds.bak'",
		"SELECT * FROM nosuch",
		"SELECT name FROM sys.databases WHERE name = N'Sales'",
		"RAISERROR(N'disk %s is full', 16, 2, N'E:')",
		"SELECT 0x0A0B AS b",
		"quit",
	}, "\ngo\n")
	literal := regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{7}\txyz\tNULL\t42`)
	for _, ver := range []string{"7.1", "7.2", "7.3", "7.4", "auto"} {
		t.Run(ver, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, tsql, "-H", host, "-p", port, "-U", "sa", "-P", testPass, "-o", "q")
			cmd.Env = append(cmd.Environ(), "TDSVER="+ver, "FREETDSCONF=/dev/null")
			cmd.Stdin = strings.NewReader(script)
			b, err := cmd.CombinedOutput()
			out := string(b)
			if err != nil {
				t.Fatalf("tsql: %v\n%s", err, out)
			}
			for _, want := range []string{
				"xyz\tNULL\t42",
				"50 percent processed.",
				"Msg 3014 ",
				"The backup set on file 1 is valid.",
				"Msg 208 (severity 16",
				"Invalid object name 'nosuch'.",
				"name\nSales\n",
				"Msg 50000 (severity 16, state 2)",
				"disk E: is full",
				"b\n0a0b\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("TDS %s: output lacks %q:\n%s", ver, want, out)
				}
			}
			for _, bad := range []string{"Error 200", "out of sync", "failed"} {
				if strings.Contains(out, bad) {
					t.Errorf("TDS %s: client error %q:\n%s", ver, bad, out)
				}
			}
			// Before 7.3, datetime2 arrives as its literal, not as a type the
			// client would format itself.
			if (ver == "7.1" || ver == "7.2") != literal.MatchString(out) {
				t.Errorf("TDS %s: datetime2 as a literal: %v, want %v:\n%s", ver, literal.MatchString(out), ver < "7.3", out)
			}
		})
	}
}
