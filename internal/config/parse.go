package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is one problem in a configuration file, at a line.
type Error struct {
	File string
	Line int
	Path string // where in the document: "sql_instances[0].address"; "" for the document itself
	Msg  string // the message, naming the key and the fix
}

func (e Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Errors is every problem found in one file, in line order. Load and Parse
// return it (as error) when the file is not valid.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads and parses a configuration file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w (pass the file with --config; config.example.yaml documents every key)", err)
	}
	return Parse(data, path)
}

// Parse parses a configuration; name is the file name used in messages and
// the base of relative paths (locations, password files).
func Parse(data []byte, name string) (*Config, error) {
	d := &decoder{file: name, lines: map[string]int{}, nulls: map[string]bool{}, inline: map[string]bool{}, reported: map[string]bool{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, Errors{d.yamlError(err)}
	}
	cfg := &Config{File: name}
	if len(doc.Content) == 0 {
		return nil, Errors{{File: name, Line: 1, Msg: "the file is empty: start from config.example.yaml"}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, Errors{{File: name, Line: root.Line, Msg: "the top level must be a mapping (temporal:, sql_instances:, backup_servers:, databases:)"}}
	}
	d.decode(root, reflect.ValueOf(cfg).Elem(), "")
	// Check even after decoding errors, so one run reports everything; errf
	// keeps one error per path, so a bad value is not also reported as missing.
	d.check(cfg)
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
		return nil, d.errs
	}
	cfg.Warnings = d.warnings
	return cfg, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns the parser's "yaml: line 3: ..." into "config.yaml:3: ...".
func (d *decoder) yamlError(err error) Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return Error{File: d.file, Line: n, Msg: "invalid YAML: " + m[2]}
	}
	return Error{File: d.file, Line: 1, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// decoder walks the YAML node tree into the Go structs, so that every key and
// value keeps its line (yaml.v3's own decoding stops at the first custom
// error and loses positions).
type decoder struct {
	file     string
	errs     Errors
	warnings []Error                        // see Config.Warnings
	lines    map[string]int                 // path -> line of its key (or list item)
	nulls    map[string]bool                // keys written with no value ("key:"), treated as not given
	names    map[string]map[string]seenName // section -> lower-cased name -> name and line, for duplicate names
	inline   map[string]bool                // mappings with an inline secret (already reported)
	reported map[string]bool                // paths with an error already
}

// warnf records a warning (see Config.Warnings).
func (d *decoder) warnf(line int, path, format string, args ...any) {
	d.warnings = append(d.warnings, Error{File: d.file, Line: max(line, 1), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) errf(line int, path, format string, args ...any) {
	if line <= 0 {
		line = 1
	}
	if path != "" {
		if d.reported[path] {
			return
		}
		d.reported[path] = true
	}
	d.errs = append(d.errs, Error{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// given reports whether a key was written in the file with a value.
func (d *decoder) given(path string) bool { _, ok := d.lines[path]; return ok && !d.nulls[path] }

// line is the line of path, or of its nearest written ancestor.
func (d *decoder) line(path string) int {
	for p := path; ; {
		if l, ok := d.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			if l, ok := d.lines[""]; ok {
				return l
			}
			return 1
		}
		p = p[:i]
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// where names a path for messages: "sql_instances[0]", or "the top level".
func where(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	sizeType     = reflect.TypeOf(Size(0))
	stripesType  = reflect.TypeOf(Stripes(0))
)

type fieldInfo struct {
	index []int
}

// fields maps the yaml keys of a struct type, inline structs flattened.
func fields(t reflect.Type) (map[string]fieldInfo, []string) {
	m := map[string]fieldInfo{}
	var names []string
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			if tag == "-" || !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int{}, prefix...), i)
			if opts == "inline" {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			m[name] = fieldInfo{index: idx}
			names = append(names, name)
		}
	}
	walk(t, nil)
	sort.Strings(names)
	return m, names
}

// inlineSecretKeys are keys that would put a secret into the file.
var inlineSecretKeys = map[string]string{
	"password": "inline password is not allowed: use password_env: VARIABLE (an environment variable of the worker) or password_file: PATH",
	"pass":     "inline password is not allowed: use password_env: VARIABLE (an environment variable of the worker) or password_file: PATH",
	"pwd":      "inline password is not allowed: use password_env: VARIABLE (an environment variable of the worker) or password_file: PATH",
	"api_key":  "inline API key is not allowed: use api_key_env: VARIABLE (an environment variable of the worker)",
	"key":      "inline key is not allowed: use key_env: VARIABLE (an environment variable of the worker) or key_file: PATH",
	"secret":   "inline key is not allowed: use key_env: VARIABLE (an environment variable of the worker) or key_file: PATH",
	"secret_access_key": "inline secret access key is not allowed: use secret_access_key_env: VARIABLE (an environment variable of the worker) " +
		"or secret_access_key_file: PATH",
	"secret_key": "inline secret access key is not allowed: use secret_access_key_env: VARIABLE (an environment variable of the worker) " +
		"or secret_access_key_file: PATH",
}

// movedKeys are keys that now live elsewhere, with where to put them.
var movedKeys = map[string]string{
	"bandwidth_limit": "bandwidth_limit is set per backup server: move it to backup_servers[].bandwidth_limit, " +
		"which every copy into that server shares (a limit per database let concurrent copies add up to a multiple of it)",
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		d.nulls[path] = true // "key:" with no value: zero value, inherited, required checks catch it
		return
	}
	t := v.Type()
	switch {
	case t == durationType:
		if !d.scalar(n, path, "a duration (30s, 15m, 2h, 7d)") {
			return
		}
		dur, err := ParseDuration(n.Value)
		if err != nil {
			d.errf(n.Line, path, "%s: %v", path, err)
			return
		}
		v.SetInt(int64(dur))
	case t == sizeType:
		if !d.scalar(n, path, "a size (65536, 64KiB, 4MiB)") {
			return
		}
		s, err := ParseSize(n.Value)
		if err != nil {
			d.errf(n.Line, path, "%s: %v", path, err)
			return
		}
		v.SetInt(int64(s))
	case t == stripesType:
		if !d.scalar(n, path, `a stripe count (1..64) or "auto"`) {
			return
		}
		if n.Value == "auto" {
			v.SetInt(int64(StripesAuto))
			return
		}
		i, err := strconv.Atoi(n.Value)
		if err != nil || i < 1 || i > MaxStripes {
			d.errf(n.Line, path, "%s: %q is out of range: use a stripe count from 1 to %d (SQL Server's limit of backup devices) or \"auto\"", path, n.Value, MaxStripes)
			return
		}
		v.SetInt(int64(i))
	case t.Kind() == reflect.Struct:
		d.mapping(n, v, path)
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		p := reflect.New(t.Elem())
		d.mapping(n, p.Elem(), path)
		v.Set(p)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errf(n.Line, path, "%s must be a list (one \"- item\" per line)", path)
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			d.lines[ip] = item.Line
			d.decode(item, s.Index(i), ip)
		}
		v.Set(s)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		d.stringMap(n, v, path)
	case t.Kind() == reflect.String:
		if !d.scalar(n, path, "a string") {
			return
		}
		v.SetString(n.Value)
	case t.Kind() == reflect.Bool:
		if !d.scalar(n, path, "true or false") {
			return
		}
		var b bool
		if n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.errf(n.Line, path, "%s: %q is not a boolean: use true or false", path, n.Value)
			return
		}
		v.SetBool(b)
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		if !d.scalar(n, path, "a whole number") {
			return
		}
		i, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil || n.Tag != "!!int" {
			d.errf(n.Line, path, "%s: %q is not a whole number", path, n.Value)
			return
		}
		v.SetInt(i)
	default:
		panic(fmt.Sprintf("config: no decoder for %s", t)) // a programming error in this package
	}
}

func (d *decoder) scalar(n *yaml.Node, path, want string) bool {
	if n.Kind != yaml.ScalarNode {
		d.errf(n.Line, path, "%s must be %s, not a %s", path, want, kindName(n.Kind))
		return false
	}
	return true
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errf(n.Line, path, "%s must be a mapping (key: value lines), not a %s", where(path), kindName(n.Kind))
		return
	}
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = n.Line
	}
	fs, names := fields(v.Type())
	seen := map[string]int{}
	for _, kv := range mergedPairs(n) {
		k, val := kv[0], kv[1]
		key := k.Value
		if first, dup := seen[key]; dup && k.Tag != "merged" {
			d.errf(k.Line, path, "duplicate key %q in %s (first at line %d)", key, where(path), first)
			continue
		}
		seen[key] = k.Line
		kp := join(path, key)
		f, ok := fs[key]
		if !ok {
			if msg, secret := inlineSecretKeys[strings.ToLower(key)]; secret {
				d.errf(k.Line, kp, "%s: %s", where(path), msg)
				d.inline[path] = true
				continue
			}
			if msg, moved := movedKeys[key]; moved {
				d.errf(k.Line, kp, "%s: %s", where(path), msg)
				continue
			}
			hint := ""
			if s := suggest(key, names); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
				d.reported[join(path, s)] = true // not also "missing required key s"
			} else {
				hint = fmt.Sprintf(" (known keys: %s)", strings.Join(names, ", "))
			}
			d.errf(k.Line, kp, "unknown key %q in %s%s", key, where(path), hint)
			continue
		}
		d.lines[kp] = k.Line
		d.decode(val, v.FieldByIndex(f.index), kp)
	}
}

// stringMap decodes a mapping whose keys are names (sql_paths: {sql01:
// [...]}): each value at path.<key>, keys unique.
func (d *decoder) stringMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errf(n.Line, path, "%s must be a mapping (name: value lines), not a %s", path, kindName(n.Kind))
		return
	}
	t := v.Type()
	m := reflect.MakeMapWithSize(t, len(n.Content)/2)
	seen := map[string]int{}
	for _, kv := range mergedPairs(n) {
		k, val := kv[0], kv[1]
		if first, dup := seen[k.Value]; dup && k.Tag != "merged" {
			d.errf(k.Line, path, "duplicate key %q in %s (first at line %d)", k.Value, path, first)
			continue
		}
		seen[k.Value] = k.Line
		kp := join(path, k.Value)
		d.lines[kp] = k.Line
		ev := reflect.New(t.Elem()).Elem()
		d.decode(val, ev, kp)
		m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), ev)
	}
	v.Set(m)
}

// mergedPairs returns the key/value pairs of a mapping with YAML merge keys
// (<<: *anchor) expanded; merged pairs come first and explicit keys override
// them. Merged keys are tagged "merged" so they do not count as duplicates.
func mergedPairs(n *yaml.Node) [][2]*yaml.Node {
	var merged, own [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			srcs := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, s := range srcs {
				for s.Kind == yaml.AliasNode {
					s = s.Alias
				}
				if s.Kind != yaml.MappingNode {
					continue
				}
				for _, p := range mergedPairs(s) {
					mk := *p[0]
					mk.Tag = "merged"
					mk.Line = k.Line
					merged = append(merged, [2]*yaml.Node{&mk, p[1]})
				}
			}
			continue
		}
		own = append(own, [2]*yaml.Node{k, v})
	}
	if len(merged) == 0 {
		return own
	}
	ownKeys := map[string]bool{}
	for _, p := range own {
		ownKeys[p[0].Value] = true
	}
	var out [][2]*yaml.Node
	seen := map[string]bool{}
	for _, p := range merged {
		if !ownKeys[p[0].Value] && !seen[p[0].Value] {
			seen[p[0].Value] = true
			out = append(out, p)
		}
	}
	return append(out, own...)
}

// suggest returns the known key closest to a misspelt one, if close enough.
func suggest(key string, names []string) string {
	best, bestD := "", 1<<30
	for _, n := range names {
		if dist := levenshtein(strings.ToLower(key), n); dist < bestD {
			best, bestD = n, dist
		}
	}
	limit := 2
	if len(key) >= 9 {
		limit = 3
	}
	if bestD <= limit {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
