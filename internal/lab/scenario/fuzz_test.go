package scenario

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse parses scenario files: every error is a *ParseError matching
// ErrInvalid, and a scenario that parses is valid, formats, and parses
// back to itself (formatting again gives the same text).
func FuzzParse(f *testing.F) {
	for _, name := range Names() {
		s, err := Builtin(name)
		if err != nil {
			f.Fatal(err)
		}
		var b bytes.Buffer
		if err := s.Format(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.String())
	}
	f.Add(handWritten)
	f.Add("scenario x\nnode a capacity=1.5TB up=17.4Mbit down=2.5MB/s\nlink a -> * loss=0.001% delay=250us\n")
	f.Add("scenario x\nnode a\nlink a <-> a\n")
	f.Add("scenario x\nnode a capacity=99999999999999999999PiB\n")
	f.Add("scenario x\ndefault loss=100.0000000000000001%\nnode a\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(strings.NewReader(text))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v (%T) is not a *ParseError matching ErrInvalid", err, err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted a scenario Validate refuses: %v", err)
		}
		var b bytes.Buffer
		if err := s.Format(&b); err != nil {
			t.Fatalf("Format: %v", err)
		}
		again, err := Parse(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("Parse of Format's output: %v\n%s", err, b.String())
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("Parse(Format(s)) differs from s\nformatted:\n%s\ns:   %+v\ngot: %+v", b.String(), s, again)
		}
		var b2 bytes.Buffer
		if err := again.Format(&b2); err != nil || b2.String() != b.String() {
			t.Fatalf("formatting twice differs (%v):\n%s\n---\n%s", err, b.String(), b2.String())
		}
	})
}
