package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// repoFiles is every file of the repository that exists now: tracked, or new
// and not ignored (slash paths relative to the root).
func repoFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		if fi, err := os.Stat(filepath.Join(root, f)); err == nil && fi.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	if len(files) < 50 {
		t.Fatalf("git ls-files lists %d files; is %s the repository?", len(files), root)
	}
	return files
}

func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A path written relative to its file ("../x") starts after a blank, a quote,
// a bracket or an equals sign; one inside a longer path ("a/../b") does not.
var (
	upRE = regexp.MustCompile("(?:^|[\\s\"'`(\\[=:,])((?:\\.\\./)+)")
	// Machine-specific places that no reader of the repository has.
	absRE = regexp.MustCompile("(?:^|[\\s\"'`(\\[=:,])(/(?:tmp|work|home|root|Users|mnt)/[^\\s\"'`)\\]]*)")
)

// The repository stands alone: no file points at a path outside it, and no
// document at a scratch or home directory of the machine it was written on.
func TestNoPathOutsideRepository(t *testing.T) {
	for _, f := range repoFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			continue // binary (pictures)
		}
		depth := strings.Count(path.Dir(f), "/") + 1
		if path.Dir(f) == "." {
			depth = 0
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range upRE.FindAllStringSubmatch(line, -1) {
				if ups := strings.Count(m[1], "../"); ups > depth {
					t.Errorf("%s:%d: %q leaves the repository (%d levels up from %s): put what it points at into the repository", f, i+1, strings.TrimSpace(line), ups, path.Dir(f))
				}
			}
			if strings.HasSuffix(f, ".md") {
				for _, m := range absRE.FindAllStringSubmatch(line, -1) {
					t.Errorf("%s:%d: %s is a path of one machine: use a path in the repository or a relative one", f, i+1, m[1])
				}
			}
		}
	}
}

// Every relative link of the documents reaches a file of the repository.
func TestMarkdownLinksResolve(t *testing.T) {
	linkRE := regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	files := repoFiles(t)
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(readRepo(t, f), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue // an anchor, or https:, mailto:
			}
			p := path.Clean(path.Join(path.Dir(f), target))
			if strings.HasPrefix(p, "../") || !have[p] && !isDir(p) {
				t.Errorf("%s links to %s, which is not in the repository", f, m[1])
			}
		}
	}
}

func isDir(rel string) bool {
	fi, err := os.Stat(filepath.Join(root, rel))
	return err == nil && fi.IsDir()
}

// The documents the README promises exist, stand on their own and name the
// case study they rest on.
func TestDocsStandAlone(t *testing.T) {
	readme := readRepo(t, "README.md")
	const caseStudy = "A Case Study: Fast and Reliable Backup and Restore of a VLDB over the Network"
	for _, doc := range []string{"docs/valid-backup.md", "docs/cycle.md", "docs/crash-guarantees.md", "docs/plan-formulas.md"} {
		text := readRepo(t, doc)
		// A title may wrap, in a paragraph or a quote.
		flat := regexp.MustCompile(`\s*\n>?\s*`).ReplaceAllString(text, " ")
		if !strings.Contains(readme, "("+doc+")") {
			t.Errorf("README.md does not link %s", doc)
		}
		if !strings.Contains(flat, caseStudy) {
			t.Errorf("%s does not name its source, the case study %q", doc, caseStudy)
		}
		// "seed" is how the code's comments cite the case study; a reader of
		// the documents meets it by its title.
		if m := regexp.MustCompile(`(?i)\bseed \d{3}\b|\bthe seed\b|\bseed's\b`).FindString(text); m != "" {
			t.Errorf("%s says %q: name the case study instead", doc, m)
		}
	}
	contrib := readRepo(t, "CONTRIBUTING.md")
	for _, want := range []string{"make test", "make chaos", "make bench", "make screenshots", "go test ./deploy"} {
		if !strings.Contains(contrib, want) {
			t.Errorf("CONTRIBUTING.md does not explain %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "DEVELOPERS.md")); err == nil {
		t.Error("DEVELOPERS.md describes an environment outside the repository: contributors read CONTRIBUTING.md")
	}
}

// passwordEnvNames is every environment variable config.example.yaml names
// for a secret.
func passwordEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	cfg := loadConfig(t, "config.example.yaml")
	names := map[string]bool{}
	for _, s := range cfg.SQLInstances {
		if s.Password.Env != "" {
			names[s.Password.Env] = true
		}
	}
	for _, b := range cfg.BackupServers {
		if b.SMB != nil && b.SMB.Password.Env != "" {
			names[b.SMB.Password.Env] = true
		}
	}
	for _, k := range cfg.ManifestKeys {
		if k.Env != "" {
			names[k.Env] = true
		}
	}
	if len(names) == 0 {
		t.Fatal("config.example.yaml names no password_env")
	}
	return names
}

// The README's command that starts the worker on config.example.yaml sets
// exactly the variables that file names, and every password variable the
// README mentions is one the example configuration uses.
func TestReadmeEnvNamesMatchExampleConfig(t *testing.T) {
	names := passwordEnvNames(t)
	readme := readRepo(t, "README.md")
	assignRE := regexp.MustCompile(`(?:^|\s)([A-Z][A-Z0-9_]*)=\S*`)
	starts := 0
	for i, line := range strings.Split(readme, "\n") {
		if !regexp.MustCompile(`bin/worker\s+--config\s+\S*config\.ya?ml`).MatchString(line) {
			continue
		}
		set := map[string]bool{}
		for _, m := range assignRE.FindAllStringSubmatch(line, -1) {
			set[m[1]] = true
			if !names[m[1]] {
				t.Errorf("README.md:%d sets %s, which config.example.yaml does not name (password_env: %v)", i+1, m[1], keys(names))
			}
		}
		if len(set) == 0 {
			continue // a worker started without secrets in its environment (--dev, --help)
		}
		starts++
		for n := range names {
			if !set[n] {
				t.Errorf("README.md:%d starts the worker without %s, which config.example.yaml names as password_env", i+1, n)
			}
		}
	}
	if starts == 0 {
		t.Error("README.md never shows the worker started with the passwords config.example.yaml names")
	}
	for _, m := range regexp.MustCompile(`\b[A-Z][A-Z0-9_]*_(?:PASSWORD|PWD)\b`).FindAllString(readme, -1) {
		if !names[m] {
			t.Errorf("README.md mentions %s, which config.example.yaml does not name (password_env: %v)", m, keys(names))
		}
	}
}

// The verification instance restores from the remote backup server's
// unc_paths: both the README and the example configuration say so where a
// new user sets them up.
func TestVerificationInstanceReachesUNCPaths(t *testing.T) {
	re := regexp.MustCompile(`(?is)verification instance[^.]{0,200}?\bunc_paths\b|\bunc_paths\b[^.]{0,200}?verification instance`)
	for _, f := range []string{"README.md", "config.example.yaml"} {
		text := readRepo(t, f)
		if f == "config.example.yaml" {
			// YAML comments: one sentence may run over several lines.
			text = regexp.MustCompile(`\n\s*#?\s*`).ReplaceAllString(text, " ")
		}
		if !re.MatchString(text) {
			t.Errorf("%s does not say that the verification instance must reach the remote server's unc_paths", f)
		}
	}
}

// The README's compose section walks through the first verified cycle with
// what the stack provides.
func TestReadmeComposeWalkthrough(t *testing.T) {
	readme := readRepo(t, "README.md")
	start := strings.Index(readme, "\n## The compose stack")
	if start < 0 {
		t.Fatal(`README.md has no section "## The compose stack"`)
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, want := range []string{"sh deploy/make-secrets.sh", "docker compose up", "docker compose ps", "--database Sales", "--wait",
		"http://localhost:8080", "status", "/metrics", "backupcycle_last_verified_timestamp_seconds"} {
		if !strings.Contains(section, want) {
			t.Errorf("README.md's compose section does not show %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "deploy/make-secrets.sh")); err != nil {
		t.Error(err)
	}
}

// docTestsRE is how the documents name the tests that show a behaviour:
// `package` (`TestA`, `TestB`).
var docTestsRE = regexp.MustCompile("`([a-z][\\w/]*)` \\(((?:`Test\\w+`(?:, )?)+)\\)")

// Every test a document names as the one that shows a behaviour exists in
// the package named beside it: a test renamed or moved to another package
// leaves the reader looking for it in vain.
func TestDocumentedTestsExist(t *testing.T) {
	funcs := map[string]string{} // package directory: its test files' text
	for _, f := range repoFiles(t) {
		if strings.HasSuffix(f, "_test.go") {
			funcs[path.Dir(f)] += readRepo(t, f)
		}
	}
	named := 0
	for _, doc := range []string{"README.md", "CONTRIBUTING.md", "docs/cycle.md"} {
		for _, m := range docTestsRE.FindAllStringSubmatch(readRepo(t, doc), -1) {
			pkg := m[1]
			for _, name := range regexp.MustCompile("`(Test\\w+)`").FindAllStringSubmatch(m[2], -1) {
				named++
				if !strings.Contains(funcs[pkg], "func "+name[1]+"(") {
					t.Errorf("%s names %s in %s: no such test there", doc, name[1], pkg)
				}
			}
		}
	}
	if named < 50 {
		t.Fatalf("found %d tests named in the documents; has their form changed?", named)
	}
}
