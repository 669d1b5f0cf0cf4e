package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/member"
)

// scrape reads a /metrics page with the Prometheus text parser and sums
// the metric name over the series whose labels include want.
func scrape(url, name string, want map[string]string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	f := fs[name]
	if f == nil {
		return 0, nil
	}
series:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			if !found {
				continue series
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			sum += m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum, nil
}

// Real `quilt node` processes serve /metrics, whose counters move with a
// put and a get; `quilt status` says the grid is healthy, then, once a
// node is killed, that it is degraded and which node is down.
func TestProcessMetricsAndStatus(t *testing.T) {
	bin := buildQuilt(t)
	base := t.TempDir()
	env := append(os.Environ(), "QUILT_HOME="+filepath.Join(base, "home"), "QUILT_GRID=")
	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, p := range procs {
			if p.Process != nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	})
	metricsRE := regexp.MustCompile(`metrics: (http://\S+/metrics)`)
	var urls, addrs []string
	start := func(i int, join string) string {
		dir := filepath.Join(base, fmt.Sprintf("node%d", i))
		args := []string{"node", "--data", dir, "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--log", "warn", "--cpus", "1", "--no-fsync"}
		if join != "" {
			args = append(args, "--join", join)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		log, err := os.Create(dir + ".log")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		inv := waitFile(t, filepath.Join(dir, "invite"), 30*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(dir + ".log")
			if m := metricsRE.FindSubmatch(b); m != nil {
				urls = append(urls, string(m[1]))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d printed no metrics URL:\n%s", i, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
		own, err := identity.ParseInvite(inv)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, own.Addrs[0])
		return inv
	}
	first := start(0, "")
	for i := 1; i < 4; i++ {
		start(i, first)
	}
	inv, _ := identity.ParseInvite(first)
	inv.Addrs = addrs
	grid := inv.String()
	quilt := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append(args, "--grid", grid)...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Run()
		return out.String() + errb.String(), cmd.ProcessState.ExitCode()
	}
	// eventually runs check until it holds, for at most within.
	eventually := func(what string, within time.Duration, check func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			ok, last := check()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v; last:\n%s", what, within, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	eventually("status says healthy with 4 nodes", 30*time.Second, func() (bool, string) {
		out, code := quilt("status")
		return code == 0 && strings.Contains(out, "grid HEALTHY") && strings.Contains(out, "4 alive, 0 suspect, 0 dead"), out
	})

	data := bytes.Repeat([]byte("quilt metrics "), 10000)
	file := filepath.Join(base, "in")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := quilt("put", "--k", "2", "--n", "3", "--happy", "3", file)
	if code != 0 {
		t.Fatalf("put: %s", out)
	}
	rcap := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	if out, code := quilt("get", rcap, "-o", filepath.Join(base, "out")); code != 0 {
		t.Fatalf("get: %s", out)
	}
	// The counters move; a request is counted as its handler returns, so
	// scrape until they have, bounded.
	sum := func(name string, labels map[string]string) (float64, string) {
		total := 0.0
		for _, u := range urls {
			v, err := scrape(u, name, labels)
			if err != nil {
				return -1, err.Error()
			}
			total += v
		}
		return total, fmt.Sprintf("%s%v = %v", name, labels, total)
	}
	eventually("metrics count the put and the get", 10*time.Second, func() (bool, string) {
		puts, a := sum("quilt_node_requests_total", map[string]string{"op": "put", "outcome": "ok"})
		gets, b := sum("quilt_node_requests_total", map[string]string{"op": "get", "outcome": "ok"})
		in, c := sum("quilt_node_received_bytes_total", map[string]string{"op": "put"})
		sent, d := sum("quilt_node_sent_bytes_total", map[string]string{"op": "get"})
		shares, e := sum("quilt_node_shares", nil)
		// Three shares of half the file each went in (on three of the
		// four nodes); two at least came back out (k = 2).
		return puts == 3 && gets >= 2 && in > float64(len(data)) && sent >= float64(len(data)) && shares == 3,
			strings.Join([]string{a, b, c, d, e}, "\n")
	})
	if alive, _ := sum("quilt_node_members", map[string]string{"state": "alive"}); alive != 16 {
		t.Errorf("the four nodes see %v alive members between them, want 16", alive)
	}

	// A gateway counts its S3 requests: an unsigned listing is refused
	// (403) and counted as ListBuckets.
	gw := exec.Command(bin, "gateway", "--grid", grid, "--dir", filepath.Join(base, "gw"), "--s3", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--log", "warn")
	gw.Env = env
	gwLog := filepath.Join(base, "gw.log")
	lf, err := os.Create(gwLog)
	if err != nil {
		t.Fatal(err)
	}
	gw.Stdout, gw.Stderr = lf, lf
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	procs = append(procs, gw)
	s3RE := regexp.MustCompile(`S3 at (http://\S+)`)
	var s3URL, gwMetrics string
	eventually("the gateway prints its S3 and metrics addresses", 30*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(gwLog)
		if m := s3RE.FindSubmatch(b); m != nil {
			s3URL = string(m[1])
		}
		if m := metricsRE.FindSubmatch(b); m != nil {
			gwMetrics = string(m[1])
		}
		return s3URL != "" && gwMetrics != "", string(b)
	})
	resp, err := http.Get(s3URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("unsigned ListBuckets: %s", resp.Status)
	}
	eventually("the gateway's metrics count the refused listing", 10*time.Second, func() (bool, string) {
		v, err := scrape(gwMetrics, "quilt_s3_requests_total", map[string]string{"op": "ListBuckets", "status": "403"})
		return err == nil && v == 1, fmt.Sprint(v, err)
	})

	// One node killed: status says degraded and names it, as suspect or
	// dead, and exits 1.
	if err := procs[2].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	procs[2].Wait()
	eventually("status shows the killed node down", 40*time.Second, func() (bool, string) {
		out, code := quilt("status")
		return code == 1 && strings.Contains(out, "grid DEGRADED") && strings.Contains(out, addrs[2]), out
	})
	out, code = quilt("status", "--json")
	var st gridStatus
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &st); err != nil || code != 1 {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	if st.Verdict != "degraded" || st.Nodes["alive"] != 3 || len(st.Down) != 1 || st.Down[0].Addr != addrs[2] || st.ObjectsAtRisk != nil {
		t.Fatalf("status --json after a node was killed: %+v", st)
	}
}

// The version line names the version, the commit (marked when the tree
// had changes) and the Go version; quilt --version prints it.
func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-27T06:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionOf("v1.2.3", bi), "quilt v1.2.3 (commit 0123456789ab (modified), 2026-11-27T06:00:00Z, go1.26.8)"; got != want {
		t.Errorf("versionOf = %q, want %q", got, want)
	}
	if got := versionOf("devel", nil); got != "quilt devel" {
		t.Errorf("without build information: %q", got)
	}
	bin := buildQuilt(t)
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "quilt ") || !strings.Contains(string(out), "go1.") {
			t.Errorf("quilt %v: %v\n%s", args, err, out)
		}
	}
}

// The verdict: healthy when every member is alive (those that left do
// not count), degraded when some are suspect or dead, critical when
// fewer than k are alive.
func TestStatusVerdict(t *testing.T) {
	ms := func(states ...string) []member.Member {
		var out []member.Member
		for i, s := range states {
			out = append(out, member.Member{Meta: member.Meta{ID: fmt.Sprint(i), Zone: fmt.Sprintf("z%d", i%2), Used: 10, Free: 100, Capacity: 110}, State: s})
		}
		return out
	}
	for _, c := range []struct {
		states  []string
		verdict string
		down    int
	}{
		{[]string{"alive", "alive", "alive"}, "healthy", 0},
		{[]string{"alive", "alive", "alive", "left"}, "healthy", 0},
		{[]string{"alive", "alive", "alive", "suspect"}, "degraded", 1},
		{[]string{"alive", "alive", "alive", "dead", "dead"}, "degraded", 2},
		{[]string{"alive", "alive", "dead"}, "critical", 1},
		{[]string{"alive", "suspect", "suspect"}, "critical", 2},
	} {
		st := summarize(ms(c.states...))
		if st.Verdict != c.verdict || len(st.Down) != c.down {
			t.Errorf("%v: %s with %d down, want %s with %d", c.states, st.Verdict, len(st.Down), c.verdict, c.down)
		}
		var b strings.Builder
		st.print(&b)
		if !strings.Contains(b.String(), "grid "+strings.ToUpper(c.verdict)) || !strings.Contains(b.String(), "z1") {
			t.Errorf("%v printed:\n%s", c.states, b.String())
		}
	}
	// Space counts the members that are up (alive or suspect).
	if st := summarize(ms("alive", "suspect", "dead", "left")); st.Used != 20 || st.Free != 200 || st.Capacity != 220 {
		t.Errorf("space of 2 members up: used %d, free %d, capacity %d", st.Used, st.Free, st.Capacity)
	}
}
