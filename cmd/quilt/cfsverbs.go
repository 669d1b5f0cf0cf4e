package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"

	"github.com/quilt-grid/quilt/internal/cfs"
	"github.com/quilt-grid/quilt/internal/dag"
)

// The output of the cfs verbs that print.

func printLs(f *cfs.FS, p string, long bool) error {
	items, err := f.Ls(p)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, it := range items {
		name := it.Name
		switch it.Type {
		case dag.Dir:
			name += "/"
		case dag.Symlink:
			name += " -> " + it.Target
		}
		if !long {
			fmt.Fprintln(tw, name)
			continue
		}
		mode := "-rw-"
		switch {
		case it.Type == dag.Dir:
			mode = "drwx"
		case it.Type == dag.Symlink:
			mode = "lrwx"
		case it.Exec:
			mode = "-rwx"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", mode, it.Size, it.Time.Time().Format("2006-01-02 15:04:05"), it.Current.Short(), name)
	}
	return tw.Flush()
}

func printLog(f *cfs.FS, p string) error {
	log, err := f.Log(p)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, le := range log {
		mark := " "
		if le.Current {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\tby %s\t%s\n", mark, le.Hash.Short(), le.Time.Time().Format("2006-01-02 15:04:05.000"),
			le.Action, le.By, le.Detail)
	}
	return tw.Flush()
}

func printShow(f *cfs.FS, p string) error {
	tree, err := f.Tree(p)
	if err != nil {
		return err
	}
	fmt.Println(p)
	for _, it := range tree {
		suffix := ""
		switch it.Type {
		case dag.Dir:
			suffix = "/"
		case dag.Symlink:
			suffix = " -> " + it.Target
		default:
			suffix = fmt.Sprintf("  (%d bytes)", it.Size)
		}
		fmt.Printf("%s  %s%s\n", strings.Repeat("  ", it.Depth), it.Name, suffix)
	}
	return nil
}

func printKeys(f *cfs.FS) error {
	keys, err := f.Keys()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", "FINGERPRINT", "LABEL", "UNDER", "STATE")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Fingerprint, k.Label, k.Dir, k.State)
	}
	return tw.Flush()
}

func printMembers(ctx context.Context, f *cfs.FS) error {
	ms, err := f.Members(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", "NODE", "ADDRESS", "STATE", "RECORDS", "LOG")
	for _, m := range ms {
		records, log := "-", "-"
		if m.Records >= 0 {
			records = fmt.Sprint(m.Records)
		}
		if m.Log != "" {
			log = m.Log
		}
		fmt.Fprintf(tw, "%.12s\t%s\t%s\t%s\t%s\n", m.ID, m.Addr, m.State, records, log)
	}
	return tw.Flush()
}

// watch prints a line, or runs cmd with sh, for every entry that arrives.
func watch(ctx context.Context, f *cfs.FS, cmd string) error {
	n := f.Namespace()
	fmt.Fprintf(os.Stderr, "watching namespace %q; Ctrl-C to stop\n", n.Name)
	return f.Watch(ctx, cfs.Watcher{
		Ready: func() { fmt.Fprintln(os.Stderr, "watch: up to date") },
		Event: func(ev cfs.Event) {
			entry := ev.Entry.String()
			if cmd == "" {
				fmt.Printf("%s %s %s\n", ev.Type, ev.Path, entry[:12])
				return
			}
			sh := exec.CommandContext(ctx, "sh", "-c", cmd)
			sh.Stdout, sh.Stderr = os.Stdout, os.Stderr
			sh.Env = append(os.Environ(), "QUILT_EVENT_TYPE="+ev.Type, "QUILT_EVENT_PATH="+ev.Path,
				"QUILT_EVENT_ENTRY="+entry, "QUILT_NAMESPACE="+n.Name, "QUILT_NAMESPACE_ID="+n.ID)
			if err := sh.Run(); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "watch: handler for %s %s: %v\n", ev.Type, ev.Path, err)
			}
		},
		Trouble: func(err error) { fmt.Fprintf(os.Stderr, "watch: %v; trying another node\n", err) },
	})
}
