package version

import (
	"runtime/debug"
	"testing"
)

func TestFormat(t *testing.T) {
	cases := []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3f2c1a9d0b7e55aa00112233445566778899aabb"}, {Key: "vcs.time", Value: "2025-01-31T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"v1.2.0 (3f2c1a9d0b7e, 2025-01-31T10:00:00Z, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) (abc, modified, go1.26.8)"},
		{debug.BuildInfo{}, "(devel) (unknown revision)"},
	}
	for _, c := range cases {
		if got := format(&c.bi); got != c.want {
			t.Errorf("format = %q, want %q", got, c.want)
		}
	}
	if String() == "" {
		t.Error("String is empty")
	}
}
