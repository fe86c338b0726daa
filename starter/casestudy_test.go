package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeCaseStudyPlan runs the README's two `starter plan` commands on
// docs/case-study.yaml and checks that the estimates the README shows are
// what the plan prints: the case study's 2 h 25 min, and 36 min with
// compression.
func TestReadmeCaseStudyPlan(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	i := strings.Index(readme, "### The case study's numbers")
	if i < 0 {
		t.Fatal("README has no section \"The case study's numbers\"")
	}
	section := readme[i:]
	section = section[:strings.Index(section[4:], "\n### ")+4]
	var cmds [][]string
	for _, line := range strings.Split(strings.ReplaceAll(section, "\\\n", ""), "\n") {
		if rest, ok := strings.CutPrefix(line, "bin/starter plan "); ok {
			cmds = append(cmds, []string{line, "plan " + rest})
		}
	}
	blocks := regexp.MustCompile("(?s)```text\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(cmds) != 2 || len(blocks) != 2 {
		t.Fatalf("README section: %d commands and %d output blocks, want 2 and 2", len(cmds), len(blocks))
	}
	for k, c := range cmds {
		args := strings.Fields(c[1])
		for j, a := range args {
			if a == "docs/case-study.yaml" {
				args[j] = "../docs/case-study.yaml"
			}
		}
		code, out, errs := runStarter(t, args...)
		if code != exitOK {
			t.Fatalf("starter %s: exit %d\n%s%s", c[1], code, out, errs)
		}
		for _, line := range strings.Split(strings.TrimRight(blocks[k][1], "\n"), "\n") {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("starter %s does not print the README's line\n%q\nit prints:\n%s", c[1], line, out)
			}
		}
	}
	if !strings.Contains(blocks[0][1], "backup     2h25m") || !strings.Contains(blocks[1][1], "backup       36m") {
		t.Errorf("the README's estimates are not the case study's 2 h 25 min and 36 min:\n%s\n%s", blocks[0][1], blocks[1][1])
	}
	// The recover after losing the site: the full over the network in the
	// case study's 2 h 25 min and a day of minute logs, within its 4 h.
	if !strings.Contains(blocks[0][1], "  full       2h25m38s") || !strings.Contains(blocks[0][1], "1440 log backups") ||
		!strings.Contains(blocks[0][1], "within the rto of 4h0m0s") {
		t.Errorf("the README's site-loss recover is not the case study's:\n%s", blocks[0][1])
	}
}
