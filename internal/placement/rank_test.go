package placement

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestRankDeterministic(t *testing.T) {
	r := newRand()
	nodes := zonedNodes(map[string]int{"a": 4, "b": 3, "": 3})
	nodes[2].Free = 7 * GiB
	for range 100 {
		si := randSI(r)
		want := Rank(si, nodes)
		wantPlan, err := Place(si, nodes, 10, 7, MiB)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			in := shuffled(r, nodes)
			orig := slices.Clone(in)
			if got := Rank(si, in); !slices.Equal(got, want) {
				t.Fatalf("Rank(%x) depends on input order:\n got %v\nwant %v", si, ids(got), ids(want))
			}
			if !slices.Equal(in, orig) {
				t.Fatalf("Rank modified its input")
			}
			got, err := Place(si, in, 10, 7, MiB)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Nodes, wantPlan.Nodes) {
				t.Fatalf("Place(%x) depends on input order:\n got %v\nwant %v", si, got.Nodes, wantPlan.Nodes)
			}
			if !slices.Equal(in, orig) {
				t.Fatalf("Place modified its input")
			}
		}
	}
}

// TestRankGolden pins the hash and score: every node of a grid, whatever
// its version, must rank nodes the same way, or downloads look in the wrong
// places. If this fails, placement changed for every stored object.
func TestRankGolden(t *testing.T) {
	nodes := []Node{
		{ID: "alpha", Zone: "z1", Free: 100 * GiB},
		{ID: "bravo", Zone: "z1", Free: 200 * GiB},
		{ID: "charlie", Zone: "z2", Free: 100 * GiB},
		{ID: "delta", Zone: "z2", Free: 50 * GiB},
		{ID: "echo", Zone: "z3", Free: 100 * GiB},
	}
	tests := []struct {
		si   string
		want []string
	}{
		{"", []string{"alpha", "bravo", "delta", "charlie", "echo"}},
		{"storage-index-1", []string{"charlie", "bravo", "alpha", "delta", "echo"}},
		{"storage-index-2", []string{"bravo", "charlie", "alpha", "delta", "echo"}},
	}
	for _, tt := range tests {
		if got := ids(Rank([]byte(tt.si), nodes)); !slices.Equal(got, tt.want) {
			t.Errorf("Rank(%q) = %q, want %q", tt.si, got, tt.want)
		}
	}
}

func TestRankTies(t *testing.T) {
	// The same ID twice with different zones and free space: the order must
	// still not depend on the input order.
	a := []Node{{ID: "x", Zone: "b", Free: 5}, {ID: "x", Zone: "a", Free: 5}, {ID: "y", Free: 5}}
	b := []Node{a[2], a[1], a[0]}
	if got, want := Rank(nil, b), Rank(nil, a); !slices.Equal(got, want) {
		t.Errorf("ties depend on input order: %v vs %v", got, want)
	}
	if got := Rank([]byte("si"), nil); len(got) != 0 {
		t.Errorf("Rank of no nodes = %v", got)
	}
}

func TestRankSpreadsFirstChoice(t *testing.T) {
	r := newRand()
	nodes := equalNodes(10, GiB)
	first := map[string]int{}
	for range 1000 {
		first[Rank(randSI(r), nodes)[0].ID]++
	}
	for _, n := range nodes {
		if first[n.ID] < 50 {
			t.Errorf("node %s first for %d of 1000 objects, want >= 50 (counts %v)", n.ID, first[n.ID], first)
		}
	}
}

func TestRankWeights(t *testing.T) {
	t.Run("double", func(t *testing.T) {
		r := newRand()
		nodes := equalNodes(5, GiB)
		nodes[0].Free = 2 * GiB
		first := map[string]int{}
		const trials = 20000
		for range trials {
			first[Rank(randSI(r), nodes)[0].ID]++
		}
		others := float64(trials-first[nodes[0].ID]) / float64(len(nodes)-1)
		ratio := float64(first[nodes[0].ID]) / others
		if math.Abs(ratio-2) > 0.2*2 {
			t.Errorf("node with 2x free space is first %.2fx as often as the others, want 2x ±20%% (counts %v)", ratio, first)
		}
	})
	t.Run("tiny", func(t *testing.T) {
		r := newRand()
		nodes := append(equalNodes(9, GiB), Node{ID: "tiny", Free: 1})
		for range 20000 {
			if got := Rank(randSI(r), nodes)[0]; got.ID == "tiny" {
				t.Fatalf("node with 1 byte free ranked first among nodes with 1 GiB")
			}
		}
	})
	t.Run("nonpositive", func(t *testing.T) {
		// Free <= 0 weighs like 1 byte: never first against real nodes, but
		// still ranked (Place decides whether it is full).
		nodes := append(equalNodes(3, GiB), Node{ID: "neg", Free: -5}, Node{ID: "zero"})
		r := newRand()
		for range 1000 {
			got := Rank(randSI(r), nodes)
			if len(got) != 5 || got[0].ID == "neg" || got[0].ID == "zero" {
				t.Fatalf("Rank = %v", ids(got))
			}
		}
	})
}

func TestRankMinimalDisruption(t *testing.T) {
	r := newRand()
	nodes := equalNodes(10, GiB)
	nodes[3].Free = 3 * GiB
	for _, gone := range []int{0, 3, 9} {
		t.Run(nodes[gone].ID, func(t *testing.T) {
			rest := Exclude(nodes, nodes[gone].ID)
			changed := 0
			for range 1000 {
				si := randSI(r)
				before, after := Rank(si, nodes), Rank(si, rest)
				if before[0].ID != after[0].ID {
					changed++
					if before[0].ID != nodes[gone].ID {
						t.Fatalf("removing %s changed first choice from %s to %s", nodes[gone].ID, before[0].ID, after[0].ID)
					}
				}
				// Stronger: the rest keep their relative order.
				if want := Exclude(before, nodes[gone].ID); !slices.Equal(after, want) {
					t.Fatalf("removing %s reordered the others:\n got %v\nwant %v", nodes[gone].ID, ids(after), ids(want))
				}
			}
			if changed == 0 {
				t.Errorf("removing %s changed no first choice in 1000 objects", nodes[gone].ID)
			}
		})
	}
}

func TestExclude(t *testing.T) {
	nodes := equalNodes(5, GiB)
	orig := slices.Clone(nodes)
	tests := []struct {
		ids  []string
		want []string
	}{
		{nil, []string{"n00", "n01", "n02", "n03", "n04"}},
		{[]string{"n01"}, []string{"n00", "n02", "n03", "n04"}},
		{[]string{"n04", "n00", "missing"}, []string{"n01", "n02", "n03"}},
		{ids(nodes), []string{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.ids), func(t *testing.T) {
			got := Exclude(nodes, tt.ids...)
			if !slices.Equal(ids(got), tt.want) {
				t.Errorf("Exclude(%v) = %v, want %v", tt.ids, ids(got), tt.want)
			}
			if !slices.Equal(nodes, orig) {
				t.Errorf("Exclude modified its input")
			}
			if len(got) > 0 && len(nodes) > 0 && &got[0] == &nodes[0] {
				t.Errorf("Exclude returned its input, not a copy")
			}
		})
	}
}
