package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testFlags is a command's flags as quilt node's: a string, a bool, a
// duration, an int and --config.
func testFlags() (*flag.FlagSet, *string, *bool, *time.Duration, *int) {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	zone := fs.String("zone", "", "")
	wan := fs.Bool("wan", false, "")
	stall := fs.Duration("stall", time.Second, "")
	cpus := fs.Int("cpus", 0, "")
	addConfigFlag(fs)
	return fs, zone, wan, stall, cpus
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "quilt.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The file sets what the command line leaves alone; the command line
// wins; what neither gives keeps its default.
func TestConfigFilePrecedence(t *testing.T) {
	p := writeConfig(t, "# a node\n\n  zone = \"north building \"\nwan=true\n--stall = 5s\n")
	fs, zone, wan, stall, cpus := testFlags()
	if err := parseArgs(fs, []string{"--config", p, "--stall", "7s"}, 0); err != nil {
		t.Fatal(err)
	}
	if *zone != "north building " || !*wan || *stall != 7*time.Second || *cpus != 0 {
		t.Fatalf("zone %q, wan %v, stall %v, cpus %d", *zone, *wan, *stall, *cpus)
	}
	// A flag given as false on the command line stays false.
	fs, _, wan, _, _ = testFlags()
	if err := parseArgs(fs, []string{"--wan=false", "--config", p}, 0); err != nil || *wan {
		t.Fatalf("--wan=false over wan = true: %v, wan %v", err, *wan)
	}
}

// Every mistake in the file is an error naming the file and the line.
func TestConfigFileErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"zone = a\nlisten = 1.2.3.4:5\n", `:2: unknown key "listen": quilt node has no --listen`},
		{"zone = a\n\nzone = b\n", ":3: zone is given twice (first on line 1)"},
		{"# ok\njust words\n", `:2: want key = value, not "just words"`},
		{"= value\n", ":1: want key = value"},
		{"cpus = many\n", `:1: cpus = "many": `},
		{"wan = maybe\n", `:1: wan = "maybe": `},
		{"zone = \"unterminated\n", ":1: zone: bad quoted value"},
		{"config = other.conf\n", ":1: a configuration file cannot name another"},
	} {
		p := writeConfig(t, c.text)
		fs, _, _, _, _ := testFlags()
		err := parseArgs(fs, []string{"--config", p}, 0)
		if err == nil || !strings.Contains(err.Error(), p+c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, p+c.want)
		}
	}
	fs, _, _, _, _ := testFlags()
	if err := parseArgs(fs, []string{"--config", "/nonexistent/quilt.conf"}, 0); err == nil || !strings.Contains(err.Error(), "/nonexistent/quilt.conf") {
		t.Errorf("missing file: %v", err)
	}
}

// quilt node --config: a bad key stops it before it starts, exit 1.
func TestConfigFileCLI(t *testing.T) {
	bin := buildQuilt(t)
	dir := t.TempDir()
	p := writeConfig(t, "data = "+filepath.Join(dir, "n")+"\nlisten = 127.0.0.1:0\ncolour = blue\n")
	cmd := exec.Command(bin, "node", "--config", p)
	cmd.Env = append(os.Environ(), "QUILT_HOME="+dir)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), p+`:3: unknown key "colour"`) {
		t.Fatalf("exit %d:\n%s", cmd.ProcessState.ExitCode(), out)
	}
	if _, err := os.Stat(filepath.Join(dir, "n")); !os.IsNotExist(err) {
		t.Fatalf("a node with a bad configuration made its data directory: %v", err)
	}
}

// The example configurations in dist/ name only flags that exist: each
// is read whole, and the command then stops on a flag given to make it
// fail before it starts anything.
func TestDistConfigs(t *testing.T) {
	bin := buildQuilt(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--config", "../../dist/node.conf", "--cpus", "-1"}, "--cpus -1"},
		{[]string{"gateway", "--config", "../../dist/gateway.conf", "--grid", "quilt://short@127.0.0.1:1"}, "bad invite"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(os.Environ(), "QUILT_HOME="+t.TempDir())
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("quilt %v: exit %d:\n%s", c.args, cmd.ProcessState.ExitCode(), out)
		}
	}
}
