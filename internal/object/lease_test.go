package object

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
)

// Without a lease secret nothing is stored: there is no shared default
// secret that would let anyone delete anyone's shares.
func TestNoLeaseSecretRefused(t *testing.T) {
	c := New(nil, Options{})
	_, _, err := c.Put(context.Background(), bytes.NewReader([]byte("x")), 1, codec.DefaultParams(), 1)
	if !errors.Is(err, ErrNoLeaseSecret) {
		t.Fatalf("Put without a lease secret: %v; want ErrNoLeaseSecret", err)
	}
	if _, err := c.Repair(context.Background(), codec.VerifyCap{}, false); !errors.Is(err, ErrNoLeaseSecret) {
		t.Fatalf("Repair without a lease secret: %v; want ErrNoLeaseSecret", err)
	}
}
