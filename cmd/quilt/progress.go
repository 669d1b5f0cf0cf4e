package main

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress draws a transfer's progress on stderr when stderr is a
// terminal, and nothing otherwise (piped, redirected, in scripts): the
// bytes done, a bar, the rate and, when the total is known, the time
// left at that rate.
type progress struct {
	label string
	total int64 // -1: unknown
	done  atomic.Int64
	// already counts bytes in done that were not moved now (found at the
	// destination, or sent by an earlier run): they fill the bar but do
	// not count towards the rate.
	already atomic.Int64
	start   time.Time
	// note, if set, adds a word after the bytes (how many files of how
	// many are done).
	note  func() string
	stop  chan struct{}
	ended chan struct{}
}

func startProgress(label string, total int64) *progress { return startProgressNote(label, total, nil) }

// startProgressNote is startProgress with a note drawn after the bytes.
func startProgressNote(label string, total int64, note func() string) *progress {
	p := &progress{label: label, total: total, note: note, start: time.Now(), stop: make(chan struct{}), ended: make(chan struct{})}
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		close(p.ended)
		return p
	}
	go func() {
		defer close(p.ended)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				p.draw(true)
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
	return p
}

func (p *progress) draw(final bool) {
	n := p.done.Load()
	secs := time.Since(p.start).Seconds()
	rate := ""
	if moved := n - p.already.Load(); secs > 0 {
		bps := float64(moved) / secs
		rate = human(int64(bps)) + "/s"
		if p.total > 0 && n < p.total && bps > 0 {
			rate += "  ETA " + eta(time.Duration(float64(p.total-n)/bps*float64(time.Second)))
		}
	}
	line := fmt.Sprintf("%s %s", p.label, human(n))
	if p.total > 0 {
		const width = 30
		fill := int(float64(width) * float64(n) / float64(p.total))
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < fill {
				bar[i] = '='
			}
		}
		line = fmt.Sprintf("%s [%s] %s / %s", p.label, bar, human(n), human(p.total))
	}
	if p.note != nil {
		line += "  " + p.note()
	}
	fmt.Fprintf(os.Stderr, "\r%s  %s\033[K", line, rate)
	if final {
		fmt.Fprintln(os.Stderr)
	}
}

// eta formats the time left: 1h02m, 3m04s, 12s.
func eta(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

func (p *progress) finish() {
	select {
	case <-p.ended:
	default:
		close(p.stop)
		<-p.ended
	}
}

// reader counts bytes read through it.
func (p *progress) reader(r io.Reader) io.Reader { return progressReader{r, p} }

// writer counts bytes written through it.
func (p *progress) writer(w io.Writer) io.Writer { return progressWriter{w, p} }

type progressReader struct {
	r io.Reader
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.done.Add(int64(n))
	return n, err
}

type progressWriter struct {
	w io.Writer
	p *progress
}

func (w progressWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.p.done.Add(int64(n))
	return n, err
}
