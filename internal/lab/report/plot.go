package report

import (
	"errors"
	"fmt"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ErrNoSeries is returned by [Plot.Save] for a plot without series.
var ErrNoSeries = errors.New("report: plot has no series")

// ErrNoData is returned by [Plot.Save] when no series has a point that can
// be drawn (all are NaN, infinite, or not positive on a log axis).
var ErrNoData = errors.New("report: plot has no drawable points")

// Size and resolution of the PNGs Plot.Save writes: 16 × 10 cm at 150 dpi
// is about 945 × 591 pixels, readable on screen and in a document.
const (
	plotWidth  = 16 * vg.Centimeter
	plotHeight = 10 * vg.Centimeter
	plotDPI    = 150
	plotMargin = 3 * vg.Millimeter // white space around everything
)

// Plot is a line plot of one or more series, saved as a PNG by [Plot.Save].
type Plot struct {
	Title, XLabel, YLabel string

	// LogX and LogY make an axis logarithmic. Points with a value <= 0 on
	// a log axis cannot be drawn and are dropped, as are error-bar bounds
	// <= 0 on a log Y axis.
	LogX, LogY bool

	Series []Series

	// YMin and YMax, if YMax > YMin, fix the Y axis's range instead of
	// fitting it to the data (say 0 … 1 for a fraction); points outside
	// are cut off. On a log Y axis YMin must be above 0.
	YMin, YMax float64

	// LegendBottom puts the legend at the bottom left rather than the
	// top left, for curves that run along the top.
	LegendBottom bool

	// XTicks, if set, replaces the automatic ticks of the X axis, e.g.
	// "64K", "1M", "128M" on a log size axis. Ticks outside the data range
	// are not drawn.
	XTicks []Tick
}

// Series is one named curve of a [Plot]: points (X[i], Y[i]) joined by a
// line, each point marked.
type Series struct {
	Name string
	X, Y []float64

	// YErrLow and YErrHigh are optional error bars: the absolute y values
	// of the lower and upper bound at each point (for instance the first
	// and third quartile). Either may be nil for no bound on that side;
	// when set, its length must equal len(Y).
	YErrLow, YErrHigh []float64
}

// Tick is an explicit axis tick: a position and the label shown there.
type Tick struct {
	Value float64
	Label string
}

// Save draws p and writes it to path as a PNG (whatever the extension),
// with a legend, each series in its own colour, dash pattern and point
// shape. Points that cannot be drawn (NaN, infinite, <= 0 on a log axis)
// are dropped. It returns [ErrNoSeries] if p has no series and [ErrNoData]
// if nothing is left to draw.
func (p *Plot) Save(path string) (err error) {
	img, err := p.render()
	if err != nil {
		return err
	}
	return writeFile(path, func(w io.Writer) error {
		if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
			return fmt.Errorf("report: png: %w", err)
		}
		return nil
	})
}

// render draws p on an image canvas.
func (p *Plot) render() (c *vgimg.Canvas, err error) {
	if len(p.Series) == 0 {
		return nil, ErrNoSeries
	}
	for _, s := range p.Series {
		if err := s.check(); err != nil {
			return nil, err
		}
	}

	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Title.Padding = vg.Points(6)
	pl.Legend.Top = !p.LegendBottom
	pl.Legend.Left = true
	pl.Legend.XOffs = vg.Points(8)
	pl.Legend.YOffs = -vg.Points(2)
	if p.LegendBottom {
		pl.Legend.YOffs = vg.Points(2)
	}
	if p.LogX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = logTicks{}
	}
	if p.LogY {
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = logTicks{}
	}
	if len(p.XTicks) > 0 {
		var ticks plot.ConstantTicks
		for _, t := range p.XTicks {
			if p.LogX && !(t.Value > 0) {
				continue
			}
			ticks = append(ticks, plot.Tick{Value: t.Value, Label: t.Label})
		}
		pl.X.Tick.Marker = ticks
	}
	pl.Add(plotter.NewGrid())

	drawn := 0
	for i, s := range p.Series {
		xys, errs, hasErr := p.points(s)
		if len(xys) == 0 {
			continue
		}
		drawn++
		col := plotutil.DarkColors[i%len(plotutil.DarkColors)]
		line, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("report: series %q: %w", s.Name, err)
		}
		line.Color = col
		line.Width = vg.Points(1.5)
		line.Dashes = plotutil.Dashes(i)
		pts.Color = col
		pts.Shape = plotutil.Shape(i)
		pts.Radius = vg.Points(3)
		pl.Add(line, pts)
		if hasErr {
			bars, err := plotter.NewYErrorBars(errPoints{xys, errs})
			if err != nil {
				return nil, fmt.Errorf("report: series %q: %w", s.Name, err)
			}
			bars.Color = col
			pl.Add(bars)
		}
		if s.Name != "" {
			pl.Legend.Add(s.Name, line, pts)
		}
	}
	if drawn == 0 {
		return nil, ErrNoData
	}
	if p.LogX {
		widenLog(&pl.X)
	}
	if p.LogY {
		widenLog(&pl.Y)
	}
	if p.YMax > p.YMin {
		if p.LogY && p.YMin <= 0 {
			return nil, fmt.Errorf("report: plot %q: Y range from %g on a log axis", p.Title, p.YMin)
		}
		pl.Y.Min, pl.Y.Max = p.YMin, p.YMax
	}

	// gonum/plot reports some impossible layouts by panicking; the checks
	// above should prevent them, and this turns any left into an error.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("report: drawing plot %q: %v", p.Title, r)
		}
	}()
	c = vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI))
	m := plotMargin
	pl.Draw(draw.Crop(draw.New(c), m, -m, m, -m))
	return c, nil
}

// check validates the lengths of s's slices.
func (s Series) check() error {
	if len(s.X) != len(s.Y) {
		return fmt.Errorf("report: series %q: %d X values and %d Y values", s.Name, len(s.X), len(s.Y))
	}
	if s.YErrLow != nil && len(s.YErrLow) != len(s.Y) {
		return fmt.Errorf("report: series %q: %d YErrLow values and %d Y values", s.Name, len(s.YErrLow), len(s.Y))
	}
	if s.YErrHigh != nil && len(s.YErrHigh) != len(s.Y) {
		return fmt.Errorf("report: series %q: %d YErrHigh values and %d Y values", s.Name, len(s.YErrHigh), len(s.Y))
	}
	return nil
}

// points returns the drawable points of s and their error bars as
// distances below and above the point, dropping what p's axes cannot show.
// hasErr reports whether s has error bars at all.
func (p *Plot) points(s Series) (xys plotter.XYs, errs plotter.YErrors, hasErr bool) {
	hasErr = s.YErrLow != nil || s.YErrHigh != nil
	for i := range s.X {
		x, y := s.X[i], s.Y[i]
		if !p.drawable(x, p.LogX) || !p.drawable(y, p.LogY) {
			continue
		}
		xys = append(xys, plotter.XY{X: x, Y: y})
		if !hasErr {
			continue
		}
		var low, high float64
		if s.YErrLow != nil && p.drawable(s.YErrLow[i], p.LogY) {
			low = max(0, y-s.YErrLow[i])
		}
		if s.YErrHigh != nil && p.drawable(s.YErrHigh[i], p.LogY) {
			high = max(0, s.YErrHigh[i]-y)
		}
		errs = append(errs, struct{ Low, High float64 }{low, high})
	}
	return xys, errs, hasErr
}

// drawable reports whether v can be placed on an axis.
func (p *Plot) drawable(v float64, log bool) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	return !log || v > 0
}

// widenLog gives a log axis whose data is a single value a range around
// it, since gonum/plot would widen it by ±1 and could reach zero.
func widenLog(a *plot.Axis) {
	if a.Min == a.Max {
		a.Min /= 2
		a.Max *= 2
	}
}

// errPoints joins points and their error bars for plotter.NewYErrorBars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}
