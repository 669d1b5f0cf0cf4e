package gateway_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// TestRetentionChange: the rules for changing a version's retention.
func TestRetentionChange(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	soon, later, past := now.Add(time.Hour), now.Add(2*time.Hour), now.Add(-time.Hour)
	gov := &gateway.Lock{Mode: gateway.LockGovernance, RetainUntil: soon}
	comp := &gateway.Lock{Mode: gateway.LockCompliance, RetainUntil: soon}
	ended := &gateway.Lock{Mode: gateway.LockCompliance, RetainUntil: past}
	G, C := gateway.LockGovernance, gateway.LockCompliance
	for _, c := range []struct {
		name   string
		cur    *gateway.Lock
		mode   string
		until  time.Time
		bypass bool
		want   error
	}{
		{"new", nil, G, soon, false, nil},
		{"new in the past", nil, G, past, false, gateway.ErrRetentionPast},
		{"new now", nil, C, now, false, gateway.ErrRetentionPast},
		{"bad mode", nil, "FOREVER", soon, false, gateway.ErrBadLock},
		{"remove none", nil, "", time.Time{}, false, nil},
		{"governance lengthened", gov, G, later, false, nil},
		{"governance kept", gov, G, soon, false, nil},
		{"governance to compliance", gov, C, soon, false, nil},
		{"governance shortened", gov, G, now.Add(time.Minute), false, gateway.ErrLocked},
		{"governance shortened, bypassed", gov, G, now.Add(time.Minute), true, nil},
		{"governance removed", gov, "", time.Time{}, false, gateway.ErrLocked},
		{"governance removed, bypassed", gov, "", time.Time{}, true, nil},
		{"compliance lengthened", comp, C, later, false, nil},
		{"compliance shortened, bypassed", comp, C, now.Add(time.Minute), true, gateway.ErrLocked},
		{"compliance to governance, bypassed", comp, G, later, true, gateway.ErrLocked},
		{"compliance removed, bypassed", comp, "", time.Time{}, true, gateway.ErrLocked},
		{"ended compliance removed", ended, "", time.Time{}, false, nil},
		{"ended compliance to governance", ended, G, soon, false, nil},
	} {
		err := gateway.CheckRetentionChange(c.cur, c.mode, c.until, c.bypass, now)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestLockProtects: what keeps a version from being deleted.
func TestLockProtects(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		l      *gateway.Lock
		bypass bool
		want   bool
	}{
		{"none", nil, false, false},
		{"legal hold off", &gateway.Lock{}, false, false},
		{"legal hold", &gateway.Lock{LegalHold: true}, true, true},
		{"governance", &gateway.Lock{Mode: gateway.LockGovernance, RetainUntil: now.Add(time.Second)}, false, true},
		{"governance bypassed", &gateway.Lock{Mode: gateway.LockGovernance, RetainUntil: now.Add(time.Second)}, true, false},
		{"compliance bypassed", &gateway.Lock{Mode: gateway.LockCompliance, RetainUntil: now.Add(time.Second)}, true, true},
		{"compliance ended", &gateway.Lock{Mode: gateway.LockCompliance, RetainUntil: now}, false, false},
	} {
		if got := c.l.Protects(now, c.bypass); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLockConfigCheck: a default retention has a mode and one period.
func TestLockConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg gateway.LockConfig
		ok  bool
	}{
		{gateway.LockConfig{}, true},
		{gateway.LockConfig{Mode: gateway.LockGovernance, Days: 1}, true},
		{gateway.LockConfig{Mode: gateway.LockCompliance, Years: 3}, true},
		{gateway.LockConfig{Mode: gateway.LockCompliance, Days: 1, Years: 1}, false},
		{gateway.LockConfig{Mode: gateway.LockCompliance}, false},
		{gateway.LockConfig{Days: 1}, false},
		{gateway.LockConfig{Mode: gateway.LockGovernance, Years: 101}, false},
	} {
		if err := gateway.CheckLockConfig(c.cfg); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}
