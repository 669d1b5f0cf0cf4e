// Package clock is the time source of Quilt's timer-driven behaviour:
// anti-entropy rounds, stalled transfers, suspicion of silent members.
// Code that decides something by a timer takes a Clock in its
// configuration (nil: the real clock), so a test can move time by hand
// with a Fake and check that behaviour deterministically, without sleeping.
//
// The types are those of github.com/jonboulle/clockwork: its fake clock
// fires timers as Advance passes them, and BlockUntilContext lets a test
// wait until the code under test is waiting on its timers. This package
// imports nothing of Quilt (layer 0), so any layer may use it.
package clock

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock tells the time and makes timers and tickers.
type Clock = clockwork.Clock

// Timer is a Clock's timer: Chan fires once its duration has passed.
type Timer = clockwork.Timer

// Ticker is a Clock's ticker.
type Ticker = clockwork.Ticker

// Fake is a Clock whose time moves only when a test advances it.
type Fake = clockwork.FakeClock

// Real returns the system clock.
func Real() Clock { return clockwork.NewRealClock() }

// NewFake returns a fake clock set to a fixed instant, for tests.
func NewFake() *Fake {
	return clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// Or returns c, or the real clock if c is nil: how a configuration's
// zero value becomes the default.
func Or(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}
