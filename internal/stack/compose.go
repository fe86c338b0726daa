package stack

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads docker-compose.yml as `docker compose` does: the stack
// runs the services' own entrypoints and environment from it, so that the
// compose file and this stack run the same scripts with the same variables.
func loadCompose(ctx context.Context, repo string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{filepath.Join(repo, "docker-compose.yml")},
		cli.WithWorkingDirectory(repo), cli.WithResolvedPaths(true), cli.WithConsistency(true))
	if err != nil {
		return nil, fmt.Errorf("stack: docker-compose.yml: %w", err)
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("stack: docker-compose.yml does not load: %w", err)
	}
	return p, nil
}

// service is a compose service run here, as a process of this host: the
// container paths of its bind mounts are the repository's files,
// /run/secrets/NAME is <state>/secrets/NAME for the secrets the service is
// given, and image files are what the stack has instead (images).
type service struct {
	svc     types.ServiceConfig
	secrets string
	images  map[string]string // path in the image -> file here
}

func (st *stack) service(name string) (service, error) {
	s, err := st.project.GetService(name)
	if err != nil {
		return service{}, fmt.Errorf("stack: docker-compose.yml: %w", err)
	}
	return service{svc: s, secrets: st.secrets, images: st.images}, nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// mapArg maps a container path, or the path of VAR=path, to the file here.
func (s service) mapArg(a string) (string, error) {
	if prefix, v, ok := strings.Cut(a, "="); ok && envNameRE.MatchString(prefix) {
		m, err := s.mapPath(v)
		return prefix + "=" + m, err
	}
	return s.mapPath(a)
}

func (s service) mapPath(p string) (string, error) {
	if name, ok := strings.CutPrefix(p, "/run/secrets/"); ok {
		if !slices.ContainsFunc(s.svc.Secrets, func(c types.ServiceSecretConfig) bool { return c.Source == name }) {
			return "", fmt.Errorf("stack: compose service %s reads secret %s, which it is not given", s.svc.Name, name)
		}
		return filepath.Join(s.secrets, name), nil
	}
	if f, ok := s.images[p]; ok {
		return f, nil
	}
	if !strings.HasPrefix(p, "/") {
		return p, nil
	}
	var best *types.ServiceVolumeConfig
	for i, m := range s.svc.Volumes {
		t := path.Clean(m.Target)
		if (p == t || strings.HasPrefix(p, t+"/")) && (best == nil || len(t) > len(path.Clean(best.Target))) {
			best = &s.svc.Volumes[i]
		}
	}
	if best == nil || best.Type != types.VolumeTypeBind {
		return p, nil
	}
	return filepath.Join(best.Source, filepath.FromSlash(strings.TrimPrefix(p, path.Clean(best.Target)))), nil
}

// command is the service's entrypoint (and command), mapped.
func (s service) command() ([]string, error) {
	argv := append(append([]string{}, s.svc.Entrypoint...), s.svc.Command...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("stack: compose service %s has no entrypoint", s.svc.Name)
	}
	for i, a := range argv {
		m, err := s.mapArg(a)
		if err != nil {
			return nil, err
		}
		argv[i] = m
	}
	return argv, nil
}

// environ is base, then the service's environment from the compose file
// (paths mapped), with replace overriding variables the file sets (the
// host names and ports of a compose network are loopback ports here; each
// must be a variable the file sets, so a rename there fails here) and add
// adding ones it leaves to the image's defaults.
func (s service) environ(base []string, replace, add map[string]string) ([]string, error) {
	env := append([]string{}, base...)
	names := make([]string, 0, len(s.svc.Environment))
	for k := range s.svc.Environment {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := s.svc.Environment[k]
		if r, ok := replace[k]; ok {
			env = append(env, k+"="+r)
			continue
		}
		if v == nil {
			continue
		}
		m, err := s.mapPath(*v)
		if err != nil {
			return nil, err
		}
		env = append(env, k+"="+m)
	}
	for k := range replace {
		if _, ok := s.svc.Environment[k]; !ok {
			return nil, fmt.Errorf("stack: compose service %s no longer sets %s: update internal/stack to what it sets now", s.svc.Name, k)
		}
	}
	for k, v := range add {
		if _, ok := s.svc.Environment[k]; ok {
			return nil, fmt.Errorf("stack: compose service %s now sets %s itself: update internal/stack", s.svc.Name, k)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}
