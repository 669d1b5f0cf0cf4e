package placement

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// count returns how many shares of plan each node ID and each zone holds.
func count(plan Plan, nodes []Node) (perNode, perZone map[string]int) {
	zone := map[string]string{}
	for _, n := range nodes {
		zone[n.ID] = n.Zone
	}
	perNode, perZone = map[string]int{}, map[string]int{}
	for _, id := range plan.Nodes {
		perNode[id]++
		perZone[zone[id]]++
	}
	return perNode, perZone
}

func TestPlaceZoneSpread(t *testing.T) {
	tests := []struct {
		name     string
		zones    map[string]int
		n, happy int
		want     map[string]int // shares per zone
	}{
		{"5 zones of 2, n=10", map[string]int{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2}, 10, 7,
			map[string]int{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2}},
		{"3 zones of 4, n=6", map[string]int{"a": 4, "b": 4, "c": 4}, 6, 6,
			map[string]int{"a": 2, "b": 2, "c": 2}},
		{"a:7 b:3, n=4", map[string]int{"a": 7, "b": 3}, 4, 4,
			map[string]int{"a": 2, "b": 2}},
		{"a:7 b:3, n=10", map[string]int{"a": 7, "b": 3}, 10, 7,
			map[string]int{"a": 7, "b": 3}},
		{"a:1 b:9, n=3", map[string]int{"a": 1, "b": 9}, 3, 3,
			map[string]int{"a": 1, "b": 2}},
		{"unzoned and a:2, n=4", map[string]int{"": 3, "a": 2}, 4, 4,
			map[string]int{"": 2, "a": 2}},
		{"2 zones of 2, n=6 doubles up evenly", map[string]int{"a": 2, "b": 2}, 6, 4,
			map[string]int{"a": 3, "b": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := zonedNodes(tt.zones)
			r := newRand()
			for range 200 {
				si := randSI(r)
				plan, err := Place(si, nodes, tt.n, tt.happy, MiB)
				if err != nil {
					t.Fatal(err)
				}
				if len(plan.Nodes) != tt.n {
					t.Fatalf("plan has %d shares, want %d", len(plan.Nodes), tt.n)
				}
				if want := min(tt.n, len(nodes)); plan.Happiness() != want {
					t.Fatalf("happiness %d, want %d: %v", plan.Happiness(), want, plan.Nodes)
				}
				if _, perZone := count(plan, nodes); !mapsEqual(perZone, tt.want) {
					t.Fatalf("shares per zone %v, want %v (plan %v)", perZone, tt.want, plan.Nodes)
				}
			}
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

func TestPlaceFollowsRank(t *testing.T) {
	r := newRand()
	nodes := equalNodes(20, GiB)
	for range 100 {
		si := randSI(r)
		plan, err := Place(si, nodes, 10, 7, MiB)
		if err != nil {
			t.Fatal(err)
		}
		if want := ids(Rank(si, nodes)[:10]); !slices.Equal(plan.Nodes, want) {
			t.Fatalf("without zones, plan %v, want the 10 best-ranked %v", plan.Nodes, want)
		}
	}
}

func TestPlaceFewerNodesThanShares(t *testing.T) {
	r := newRand()
	nodes := equalNodes(8, GiB)
	for range 200 {
		si := randSI(r)
		plan, err := Place(si, nodes, 10, 7, MiB)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Nodes) != 10 || plan.Happiness() != 8 {
			t.Fatalf("plan %v: %d shares on %d nodes, want 10 on 8", plan.Nodes, len(plan.Nodes), plan.Happiness())
		}
		perNode, _ := count(plan, nodes)
		for id, k := range perNode {
			if k > 2 {
				t.Fatalf("node %s holds %d shares, want <= 2 (plan %v)", id, k, plan.Nodes)
			}
		}
		// The second shares go to the best-ranked nodes.
		ranked := Rank(si, nodes)
		if perNode[ranked[0].ID] != 2 || perNode[ranked[1].ID] != 2 {
			t.Fatalf("plan %v doubles up on other than the best-ranked %v", plan.Nodes, ids(ranked[:2]))
		}
	}
}

func TestPlaceHappiness(t *testing.T) {
	shareSize := int64(13 * MiB / 10) // "1.3 MiB"
	fourFull := equalNodes(10, GiB)
	for i := range 4 {
		fourFull[i].Free = shareSize - 1
	}
	tests := []struct {
		name     string
		nodes    []Node
		n, happy int
		wantErr  bool
		wantMsg  []string
	}{
		{"6 nodes, happy 7", equalNodes(6, GiB), 10, 7, true,
			[]string{"placement: ", "6 nodes known", "at least 7 distinct nodes", "6 usable", "--happy"}},
		{"10 nodes, 4 full", fourFull, 10, 7, true,
			[]string{"placement: ", "10 nodes known", "4 full", "need 1.3 MiB free each", "6 usable", "at least 7"}},
		{"no nodes", nil, 3, 1, true, []string{"0 nodes known", "0 usable"}},
		{"7 nodes, happy 7", equalNodes(7, GiB), 10, 7, false, nil},
		{"10 nodes, 3 full", append(fourFull[1:4:4], equalNodes(7, GiB)...), 10, 7, false, nil},
		{"1 node, happy 1", equalNodes(1, GiB), 3, 1, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Place([]byte("si"), tt.nodes, tt.n, tt.happy, shareSize)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Place: %v", err)
				}
				if plan.Happiness() < tt.happy || len(plan.Nodes) != tt.n {
					t.Fatalf("plan %v: %d shares on %d nodes", plan.Nodes, len(plan.Nodes), plan.Happiness())
				}
				return
			}
			if !errors.Is(err, ErrUnhappy) {
				t.Fatalf("Place err = %v, want ErrUnhappy", err)
			}
			if plan.Nodes != nil {
				t.Errorf("failed Place returned a plan %v", plan.Nodes)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestPlaceSkipsFullNodes(t *testing.T) {
	r := newRand()
	const shareSize = 10 * MiB
	for range 200 {
		nodes := equalNodes(15, 0)
		full := map[string]bool{}
		for i := range nodes {
			nodes[i].Free = shareSize/2 + r.Int64N(shareSize*3)
			full[nodes[i].ID] = nodes[i].Free < shareSize
		}
		plan, err := Place(randSI(r), nodes, 5, 1, shareSize)
		if errors.Is(err, ErrUnhappy) {
			continue // too few usable nodes this time
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range plan.Nodes {
			if full[id] {
				t.Fatalf("full node %s in plan %v", id, plan.Nodes)
			}
		}
	}
}

func TestPlaceCapacity(t *testing.T) {
	const shareSize = 100
	// b has room for one share, c for two, a for many.
	nodes := []Node{{ID: "a", Free: 10 * shareSize}, {ID: "b", Free: 2*shareSize - 1}, {ID: "c", Free: 2 * shareSize}}
	r := newRand()
	for range 100 {
		plan, err := Place(randSI(r), nodes, 6, 3, shareSize)
		if err != nil {
			t.Fatal(err)
		}
		perNode, _ := count(plan, nodes)
		if perNode["b"] != 1 || perNode["c"] != 2 || perNode["a"] != 3 {
			t.Fatalf("shares per node %v, want a:3 b:1 c:2", perNode)
		}
	}

	// Three distinct nodes, but room for only 4 shares in all.
	nodes = []Node{{ID: "a", Free: shareSize}, {ID: "b", Free: shareSize}, {ID: "c", Free: 2*shareSize + 99}}
	_, err := Place([]byte("si"), nodes, 6, 3, shareSize)
	if !errors.Is(err, ErrUnhappy) || !strings.Contains(err.Error(), "room for only 4") {
		t.Errorf("Place with room for 4 of 6 shares: err = %v, want ErrUnhappy saying room for only 4", err)
	}

	// shareSize 0: every node has room for every share.
	plan, err := Place([]byte("si"), equalNodes(2, 0), 5, 2, 0)
	if err != nil || len(plan.Nodes) != 5 || plan.Happiness() != 2 {
		t.Errorf("Place with shareSize 0 = %v, %v", plan.Nodes, err)
	}
}

func TestPlaceDuplicateIDs(t *testing.T) {
	// A node listed twice is one node: it counts once for happiness and is
	// not given shares as if it were two.
	nodes := append(equalNodes(6, GiB), Node{ID: "n00", Zone: "other", Free: 2 * GiB})
	_, err := Place([]byte("si"), nodes, 10, 7, MiB)
	if !errors.Is(err, ErrUnhappy) || !strings.Contains(err.Error(), "6 nodes known") {
		t.Errorf("Place with a duplicate ID: err = %v, want ErrUnhappy with 6 nodes known", err)
	}
}

func TestPlaceBadParams(t *testing.T) {
	nodes := equalNodes(10, GiB)
	tests := []struct {
		n, happy  int
		shareSize int64
	}{
		{0, 1, MiB},
		{-1, 1, MiB},
		{10, 0, MiB},
		{10, -3, MiB},
		{10, 11, MiB},
		{1, 2, MiB},
		{10, 7, -1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d,happy=%d,size=%d", tt.n, tt.happy, tt.shareSize), func(t *testing.T) {
			plan, err := Place([]byte("si"), nodes, tt.n, tt.happy, tt.shareSize)
			if !errors.Is(err, ErrBadParams) {
				t.Errorf("err = %v, want ErrBadParams", err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "placement: ") {
				t.Errorf("message %q does not start with \"placement: \"", err)
			}
			if plan.Nodes != nil {
				t.Errorf("plan = %v, want none", plan.Nodes)
			}
		})
	}
}

func TestPlanHappiness(t *testing.T) {
	tests := []struct {
		nodes []string
		want  int
	}{
		{nil, 0},
		{[]string{"a"}, 1},
		{[]string{"a", "a", "a"}, 1},
		{[]string{"a", "b", "a", "c"}, 3},
	}
	for _, tt := range tests {
		if got := (Plan{Nodes: tt.nodes}).Happiness(); got != tt.want {
			t.Errorf("Plan%v.Happiness() = %d, want %d", tt.nodes, got, tt.want)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	for _, err := range []error{ErrUnhappy, ErrBadParams} {
		if !strings.HasPrefix(err.Error(), "placement: ") {
			t.Errorf("%q does not start with \"placement: \"", err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{13 * MiB / 10, "1.3 MiB"},
		{MiB - 1, "1 MiB"},
		{GiB, "1 GiB"},
		{5 * GiB / 2, "2.5 GiB"},
		{1 << 40, "1 TiB"},
		{1 << 62, "4 EiB"},
		{-2048, "-2 KiB"},
	}
	for _, tt := range tests {
		if got := formatBytes(tt.in); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func BenchmarkPlace(b *testing.B) {
	for _, size := range []int{10, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			nodes := equalNodes(size, GiB)
			for i := range nodes {
				nodes[i].Zone = fmt.Sprint("z", i%5)
				nodes[i].Free += int64(i) * MiB
			}
			si := make([]byte, 32)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				si[0], si[1] = byte(i), byte(i>>8)
				if _, err := Place(si, nodes, 10, 7, MiB); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
