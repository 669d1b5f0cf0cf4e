package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A configuration file gives the flags of quilt node, quilt gateway and
// quilt up in lines of `key = value`, the key being the flag's name:
//
//	# a storage node
//	data = /var/lib/quilt
//	listen = 0.0.0.0:7700
//	zone = "north building"
//	no-fsync = true
//
// Blank lines and lines whose first non-blank character is # are
// skipped; a value may be written in double quotes (Go's escapes), for
// spaces at its ends or a # at its start. A flag given on the command
// line overrides the file. An unknown key, a key given twice, a line
// without = and a value the flag refuses are errors naming the file and
// line.

const configHelp = "read flags from FILE: lines of `key = value`, the key a flag's name (see docs/grid.md); flags on the command line override it"

// addConfigFlag gives a command's flags a --config FILE; parseArgs reads
// the file once the command line is parsed.
func addConfigFlag(fs *flag.FlagSet) {
	fs.String("config", "", configHelp)
}

// configEntry is one `key = value` line of a configuration file.
type configEntry struct {
	key, value string
	line       int
}

// readConfigFile parses a configuration file.
func readConfigFile(path string) ([]configEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	var out []configEntry
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" {
			return nil, fmt.Errorf("%s:%d: want key = value, not %q", path, n, line)
		}
		key = strings.TrimLeft(key, "-")
		if strings.HasPrefix(value, `"`) {
			v, err := strconv.Unquote(value)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: bad quoted value %s", path, n, key, value)
			}
			value = v
		}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s:%d: %s is given twice (first on line %d)", path, n, key, first)
		}
		seen[key] = n
		out = append(out, configEntry{key: key, value: value, line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return out, nil
}

// applyConfigFile sets the flags of fs that the command line left alone
// from the file named by its --config, if it has one and it is set.
func applyConfigFile(fs *flag.FlagSet) error {
	cf := fs.Lookup("config")
	if cf == nil || cf.Value.String() == "" {
		return nil
	}
	path := cf.Value.String()
	entries, err := readConfigFile(path)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, e := range entries {
		if e.key == "config" {
			return fmt.Errorf("%s:%d: a configuration file cannot name another (config)", path, e.line)
		}
		if fs.Lookup(e.key) == nil {
			return fmt.Errorf("%s:%d: unknown key %q: quilt %s has no --%s", path, e.line, e.key, fs.Name(), e.key)
		}
		if given[e.key] {
			continue
		}
		if err := fs.Set(e.key, e.value); err != nil {
			return fmt.Errorf("%s:%d: %s = %q: %w", path, e.line, e.key, e.value, err)
		}
	}
	return nil
}
