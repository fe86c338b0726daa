package mssql

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A Target holds a resolved password for the length of an activity: however
// it is printed, encoded or logged, the password does not show.
func TestTargetNeverShowsThePassword(t *testing.T) {
	const pw = "Tgt-S3cret-Pw"
	tg := Target{Instance: "sql01", Address: "sql01:1433", User: "backup", Password: pw, Encrypt: "mandatory"}
	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("connect", zap.Any("target", tg), zap.Reflect("reflected", tg), zap.Stringer("stringer", tg))
	js, err := json.Marshal(tg)
	if err != nil {
		t.Fatal(err)
	}
	outs := []string{fmt.Sprint(tg), fmt.Sprintf("%v %+v %#v %s %q", tg, tg, tg, tg, tg), fmt.Sprintf("%#v", &tg), string(js)}
	for _, e := range logs.All() {
		b, _ := json.Marshal(e.ContextMap())
		outs = append(outs, string(b))
	}
	for _, o := range outs {
		if strings.Contains(o, pw) {
			t.Errorf("the password shows in %s", o)
		}
	}
	if !strings.Contains(outs[1], "sql01:1433") {
		t.Errorf("%s: the target is not named", outs[1])
	}
}
