package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxCoordinateAxes bounds placement-coordinate: the gossip's coordinates
// have 8 dimensions, and a pinned one is padded to them so that it can be
// compared with any other.
const MaxCoordinateAxes = 8

// maxCoordinateMillis bounds each axis (an hour): beyond it a distance
// means nothing to placement.
const maxCoordinateMillis = 3600e3

// ParseCoordinate reads placement-coordinate: comma-separated milliseconds,
// 1 to MaxCoordinateAxes of them, each finite and within an hour. Empty
// gives nil (the coordinate is measured).
func ParseCoordinate(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxCoordinateAxes {
		return nil, fmt.Errorf("%d axes, at most %d", len(parts), MaxCoordinateAxes)
	}
	out := make([]float64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(v) || math.Abs(v) > maxCoordinateMillis {
			return nil, fmt.Errorf("axis %d: %q is not a number of milliseconds within an hour", i+1, p)
		}
		out[i] = v
	}
	return out, nil
}
