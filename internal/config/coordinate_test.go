package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPlacementCoordinate(t *testing.T) {
	for in, want := range map[string][]float64{"": nil, " ": nil, "0,40": {0, 40}, "-1.5": {-1.5}, " 3 , 4 ": {3, 4}} {
		got, err := ParseCoordinate(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCoordinate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "1,,2", "NaN", "Inf", "1,2,3,4,5,6,7,8,9", "4000000"} {
		c := Default()
		c.PlacementCoord = in
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "placement-coordinate") {
			t.Errorf("placement-coordinate %q: %v", in, err)
		}
	}
}
