package config

import (
	"fmt"
	"strings"
)

// checkGroups validates availability_groups: each name is a key of the
// instances' namespace (file names, workflow ids), unique with them
// ignoring case; its replicas are configured instances, each in one group
// only; its aliases are no configured instance (their databases would be
// backed up twice, under two keys) and no other group's; its rotation, or
// else the replicas' own rotations, which must then agree. It returns the
// groups by name.
func (d *decoder) checkGroups(c *Config, instances map[string]*SQLInstance, servers map[string]*BackupServer) map[string]*AvailabilityGroup {
	groups := map[string]*AvailabilityGroup{}
	replicaOf := map[string]string{} // instance -> path of its group
	aliasOf := map[string]string{}   // lower-cased alias -> path of its group
	names := map[string]string{}     // lower-cased group name -> name
	for _, g := range c.AvailabilityGroups {
		names[strings.ToLower(g.Name)] = g.Name
	}
	for i := range c.AvailabilityGroups {
		g := &c.AvailabilityGroups[i]
		path := fmt.Sprintf("availability_groups[%d]", i)
		owner := labelled(path, g.Name)
		if d.checkName(g.Name, path, owner, "availability_groups", d.seen("availability_groups")) {
			if first, dup := d.seen("sql_instances")[strings.ToLower(g.Name)]; dup {
				d.errf(d.line(join(path, "name")), join(path, "name"),
					"%s: name %q is also the name of sql_instances %q at line %d (ignoring case): a group's name takes the place of an instance's in file names and workflow ids, so choose another",
					owner, g.Name, first.name, first.line)
			} else {
				groups[g.Name] = g
			}
		}
		if g.AvailabilityGroup != "" {
			ap := join(path, "availability_group")
			switch {
			case utf16Len(g.AvailabilityGroup) > 128:
				d.errf(d.line(ap), ap, "%s: availability_group is longer than SQL Server's 128 characters", owner)
			case g.AvailabilityGroup != strings.TrimSpace(g.AvailabilityGroup):
				d.errf(d.line(ap), ap, "%s: availability_group %q has a leading or trailing blank: write the name as sys.availability_groups shows it", owner, g.AvailabilityGroup)
			}
		}
		rp := join(path, "replicas")
		if len(g.Replicas) == 0 {
			d.errf(d.line(rp), rp, "missing required key \"replicas\" in %s (the sql_instances that host its replicas, e.g. [sql01, sql02])", owner)
		}
		for j, r := range g.Replicas {
			ip := fmt.Sprintf("%s[%d]", rp, j)
			switch _, ok := instances[r]; {
			case !ok:
				d.errf(d.line(ip), ip, "%s: replica %q is not defined in sql_instances (defined: %s)", owner, r, keys(instances))
			case replicaOf[r] == path:
				d.errf(d.line(ip), ip, "%s: replica %q is listed twice", owner, r)
			case replicaOf[r] != "":
				d.errf(d.line(ip), ip, "%s: %s is already a replica of %s: an instance belongs to one availability group here; configure the group its databases are backed up by", owner, r, replicaOf[r])
			default:
				replicaOf[r] = path
			}
		}
		for j, a := range g.Aliases {
			ap := fmt.Sprintf("%s.aliases[%d]", path, j)
			k := strings.ToLower(a)
			switch _, inst := instances[a]; {
			case !nameRE.MatchString(a):
				d.errf(d.line(ap), ap, "%s: alias %q is not an instance key (letters, digits, '.', '_' or '-', at most 63)", owner, a)
			case inst:
				d.errf(d.line(ap), ap, "%s: alias %q is a configured instance: its databases would be backed up under its own name as well; remove it from sql_instances (the group backs them up through its replicas), or from aliases", owner, a)
			case names[k] != "":
				d.errf(d.line(ap), ap, "%s: alias %q is the name of availability group %s", owner, a, names[k])
			case aliasOf[k] != "":
				d.errf(d.line(ap), ap, "%s: alias %q is already an alias of %s", owner, a, aliasOf[k])
			default:
				aliasOf[k] = path
			}
		}
		g.MaxConcurrent = d.positive(g.MaxConcurrent, join(path, "max_concurrent"), owner, 1)
		d.checkGroupRotation(c, g, path, owner, servers)
	}
	return groups
}

// checkGroupRotation checks a group's own rotation, or, without one, that
// the replicas that have a rotation agree on it (a selected database of the
// group takes it, whichever replica selected it).
func (d *decoder) checkGroupRotation(c *Config, g *AvailabilityGroup, path, owner string, servers map[string]*BackupServer) {
	rot, cp := join(path, "backup_servers"), join(path, "copy_to")
	if len(g.BackupServers) > 0 {
		for _, t := range d.checkRotation(g.BackupServers, g.CopyTo, rot, cp, owner, servers) {
			for _, r := range g.Replicas {
				d.checkCopyTarget(t, servers[t], r, d.line(rot), rot, owner)
			}
		}
		return
	}
	if g.CopyTo != "" {
		d.errf(d.line(cp), cp, "%s: copy_to without backup_servers: list the rotation in backup_servers too", owner)
		return
	}
	var first *SQLInstance
	for _, r := range g.Replicas {
		in, ok := c.SQLInstance(r)
		if !ok || len(in.BackupServers) == 0 {
			continue
		}
		if first == nil {
			first = in
			continue
		}
		if strings.Join(first.BackupServers, "\x00") != strings.Join(in.BackupServers, "\x00") || first.CopyTo != in.CopyTo {
			d.errf(d.line(rot), rot, "%s: its replicas %s and %s have different backup_servers/copy_to, so the rotation of its selected databases is ambiguous: set backup_servers (and copy_to) on the group",
				owner, first.Name, in.Name)
			return
		}
	}
}

// sourceKey is the key a databases: entry of instance is deduplicated
// under: its availability group's name for a replica (an entry on the
// group and one on its replica name one availability database), else the
// instance.
func sourceKey(groups map[string]*AvailabilityGroup, c *Config, instance string) string {
	if g, ok := c.GroupOf(instance); ok && groups[g.Name] != nil {
		return g.Name
	}
	return instance
}
