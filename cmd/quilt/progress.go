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
// terminal, and nothing otherwise (piped, redirected, in scripts).
type progress struct {
	label string
	total int64 // -1: unknown
	done  atomic.Int64
	start time.Time
	stop  chan struct{}
	ended chan struct{}
}

func startProgress(label string, total int64) *progress {
	p := &progress{label: label, total: total, start: time.Now(), stop: make(chan struct{}), ended: make(chan struct{})}
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
	if secs > 0 {
		rate = human(int64(float64(n)/secs)) + "/s"
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
	fmt.Fprintf(os.Stderr, "\r%s  %s\033[K", line, rate)
	if final {
		fmt.Fprintln(os.Stderr)
	}
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
