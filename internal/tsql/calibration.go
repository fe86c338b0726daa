package tsql

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// calibrationPrefix starts every file a calibration writes. It does not
// start with DBPrefix, and ParseStripeFileName refuses its names, so no
// listing of sets, no retention and no manifest check ever takes a
// calibration file for part of a backup set.
const calibrationPrefix = "calibration~"

// CalibrationFilePrefix is the start of every file of every calibration of
// (instance, db): calibration~<inst>@<db>_. A cleanup lists it to find
// leftovers of any earlier calibration, also one whose workflow is gone.
func CalibrationFilePrefix(instance, db string) string {
	return calibrationPrefix + calibrationOwner(instance, db) + "_"
}

// maxCalibrationOwner bounds the <inst>@<db> part of calibration file
// names, so that with the token, the point and the stripe numbers they stay
// within MaxFileNameLen.
const maxCalibrationOwner = 180

// calibrationOwner is OwnerOf, cut (at a character) with a hash of the full
// owner when it is longer than maxCalibrationOwner bytes.
func calibrationOwner(instance, db string) string { return cutOwner(OwnerOf(instance, db)) }

// calibrationOwners are the owner parts of (instance, db) in every naming
// (AllNamesOf): a calibration of a build before file names were made
// case-safe left its report and leftovers under the legacy one.
func calibrationOwners(instance, db string) []string {
	var out []string
	for _, n := range AllNamesOf(instance, db) {
		out = append(out, cutOwner(n.Owner()))
	}
	return out
}

// CalibrationFilePrefixes are CalibrationFilePrefix, or with token
// CalibrationRunPrefix, in every naming of (instance, db): what a cleanup
// lists.
func CalibrationFilePrefixes(instance, db, token string) []string {
	var out []string
	for _, o := range calibrationOwners(instance, db) {
		p := calibrationPrefix + o + "_"
		if token != "" {
			p += token + "_"
		}
		out = append(out, p)
	}
	return out
}

// CalibrationReportNames are the names the latest calibration report of
// (instance, db) may have: CalibrationReportName, then the legacy one.
func CalibrationReportNames(instance, db string) []string {
	var out []string
	for _, o := range calibrationOwners(instance, db) {
		out = append(out, calibrationPrefix+o+".json")
	}
	return out
}

// cutOwner cuts an owner part longer than maxCalibrationOwner bytes (at a
// character) and suffixes a hash of the whole.
func cutOwner(o string) string {
	if len(o) <= maxCalibrationOwner {
		return o
	}
	sum := sha256.Sum256([]byte(o))
	return cutBytes(o, maxCalibrationOwner-9) + "~" + hex.EncodeToString(sum[:4])
}

// CalibrationRunPrefix is the start of every file of one calibration run
// (token: its run's short id).
func CalibrationRunPrefix(instance, db, token string) string {
	return CalibrationFilePrefix(instance, db) + token + "_"
}

// CalibrationLayout spreads the n files of grid point `point` of calibration
// `token` over the NIC paths, like Layout spreads a set's stripes:
// calibration~<inst>@<db>_<token>_p<point>_<i>of<n>.bak.
func CalibrationLayout(nicPaths []string, instance, db, token string, point, n int) ([]Stripe, error) {
	if err := checkToken(token); err != nil {
		return nil, err
	}
	out, err := Layout(nicPaths, NamesOf(instance, db), 0, n)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Name = fmt.Sprintf("%sp%d_%dof%d.bak", CalibrationRunPrefix(instance, db, token), point, i+1, n)
		out[i].Path = JoinPath(out[i].Dir, out[i].Name)
		if e := CheckFileName("calibration file name", out[i].Name); e != nil {
			return nil, e
		}
		if e := CheckPath("calibration file path", out[i].Path); e != nil {
			return nil, fmt.Errorf("%w: shorten the backup server's unc_paths", e)
		}
	}
	return out, nil
}

// CalibrationReportName is the latest calibration report of (instance, db),
// kept on the backup server beside the manifests: calibration~<inst>@<db>.json.
func CalibrationReportName(instance, db string) string {
	return calibrationPrefix + calibrationOwner(instance, db) + ".json"
}

// CalibrationSetName is the NAME = of every BACKUP of calibration token. Its
// text is also how a retry finds a statement an earlier attempt left
// running (CalibrationMarker), whatever the point and its devices, NUL
// included.
func CalibrationSetName(token string) string {
	return "backupcycle calibration " + token
}

// CalibrationMarker is the part of every calibration BACKUP's text that only
// calibration token has (its NAME = clause), for sys.dm_exec_sql_text.
func CalibrationMarker(token string) (string, error) {
	if err := checkToken(token); err != nil {
		return "", err
	}
	return "NAME = " + QuoteString(CalibrationSetName(token)), nil
}

// checkToken accepts the short run ids calibrations name their files by.
func checkToken(token string) error {
	if token == "" || len(token) > 32 || strings.Trim(token, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") != "" {
		return fmt.Errorf("calibration token %q: want 1 to 32 letters, digits or '-'", token)
	}
	return nil
}

// AnyBackupMarker is the start of every BACKUP DATABASE of db this package
// builds (and of most others' written the same way): a calibration waits
// while one runs, since SQL Server runs one data backup of a database at a
// time and a second waits for the first ("Only one data backup can occur at
// a time", https://support.microsoft.com/help/2979636): measuring then
// would time the wait, and hold up the nightly cycle.
func AnyBackupMarker(db string) (string, error) {
	q, err := QuoteIdent(db)
	if err != nil {
		return "", fmt.Errorf("BACKUP marker: %w", err)
	}
	return "BACKUP DATABASE " + q + " TO ", nil
}

// CalibrationFile is what a calibration file name says: the owner part
// (calibrationOwner of its instance and database), the run's token, the grid
// point and the stripe numbers.
type CalibrationFile struct {
	Owner        string
	Token        string
	Point, Index int
	Count        int
}

// ParseCalibrationFileName recognises names made by CalibrationLayout:
// calibration~<owner>_<token>_p<point>_<i>of<n>.bak. It reads from the right,
// since the owner may hold underscores and the token never does.
func ParseCalibrationFileName(name string) (CalibrationFile, bool) {
	rest, ok := strings.CutPrefix(name, calibrationPrefix)
	if !ok {
		return CalibrationFile{}, false
	}
	rest, ok = strings.CutSuffix(rest, ".bak")
	if !ok {
		return CalibrationFile{}, false
	}
	parts := make([]string, 3) // i-of-n, p<point>, token
	for k := range parts {
		u := strings.LastIndexByte(rest, '_')
		if u < 1 {
			return CalibrationFile{}, false
		}
		parts[k], rest = rest[u+1:], rest[:u]
	}
	is, ns, ok := strings.Cut(parts[0], "of")
	i, okI := digits(is, 1, 9)
	n, okN := digits(ns, 1, 9)
	ps, okP := strings.CutPrefix(parts[1], "p")
	point, okPoint := digits(ps, 1, 9)
	if !ok || !okI || !okN || !okP || !okPoint || i < 1 || i > n || checkToken(parts[2]) != nil {
		return CalibrationFile{}, false
	}
	return CalibrationFile{Owner: rest, Token: parts[2], Point: int(point), Index: int(i), Count: int(n)}, true
}

// IsCalibrationFileOf reports whether name is a file of a calibration of
// (instance, db), in either naming — of run token, or of any run when token
// is "". A prefix alone cannot tell: calibration~sql01@sales_ also starts
// every file of a database named sales_<anything>.
func IsCalibrationFileOf(name, instance, db, token string) bool {
	p, ok := ParseCalibrationFileName(name)
	return ok && slices.Contains(calibrationOwners(instance, db), p.Owner) && (token == "" || p.Token == token)
}
