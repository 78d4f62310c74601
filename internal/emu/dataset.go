package emu

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

//go:embed data/*.csv data/*.csv.gz
var dataFS embed.FS

// ErrDataset is returned when an embedded dataset cannot be read or is not
// what its loader expects.
var ErrDataset = errors.New("emu: bad dataset")

// Matrix is a symmetric all-pairs RTT matrix in milliseconds; RTT[i][i] is 0.
type Matrix struct {
	Names []string
	RTT   [][]float64
}

// Len is the number of nodes.
func (m *Matrix) Len() int { return len(m.Names) }

// Sub returns the matrix restricted to the nodes at idx, in that order.
func (m *Matrix) Sub(idx []int) *Matrix {
	out := &Matrix{Names: make([]string, len(idx)), RTT: make([][]float64, len(idx))}
	for a, i := range idx {
		out.Names[a] = m.Names[i]
		out.RTT[a] = make([]float64, len(idx))
		for b, j := range idx {
			out.RTT[a][b] = m.RTT[i][j]
		}
	}
	return out
}

// Site is a point on the map (a city or a base-station site).
type Site struct {
	Name     string
	Lat, Lon float64
}

func readCSV(name string) ([][]string, error) {
	raw, err := dataFS.ReadFile("data/" + name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDataset, err)
	}
	var r io.Reader = bytes.NewReader(raw)
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrDataset, name, err)
		}
		r = zr
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDataset, name, err)
	}
	return rows, nil
}

func parseFloat(name, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: %s: bad number %q", ErrDataset, name, s)
	}
	return v, nil
}

// USCities returns the WonderNetwork US cities and their symmetric RTT
// matrix (ms). Cities whose RTT to another US city was never measured are
// dropped (one pair, Phoenix-Jackson: Jackson is dropped), so the matrix is
// complete.
func USCities() ([]Site, *Matrix, error) {
	const citiesFile, rttFile = "us_cities.csv", "us_city_rtt_ms.csv"
	rows, err := readCSV(citiesFile)
	if err != nil {
		return nil, nil, err
	}
	var sites []Site
	index := map[string]int{}
	for _, r := range rows[1:] {
		if len(r) < 3 {
			return nil, nil, fmt.Errorf("%w: %s: short row", ErrDataset, citiesFile)
		}
		lat, err := parseFloat(citiesFile, r[1])
		if err != nil {
			return nil, nil, err
		}
		lon, err := parseFloat(citiesFile, r[2])
		if err != nil {
			return nil, nil, err
		}
		index[r[0]] = len(sites)
		sites = append(sites, Site{Name: r[0], Lat: lat, Lon: lon})
	}
	n := len(sites)
	rtt := make([][]float64, n)
	for i := range rtt {
		rtt[i] = make([]float64, n)
		for j := range rtt[i] {
			if i != j {
				rtt[i][j] = -1
			}
		}
	}
	rows, err = readCSV(rttFile)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rows[1:] {
		if len(r) < 3 {
			return nil, nil, fmt.Errorf("%w: %s: short row", ErrDataset, rttFile)
		}
		i, ok1 := index[r[0]]
		j, ok2 := index[r[1]]
		if !ok1 || !ok2 {
			return nil, nil, fmt.Errorf("%w: %s: unknown city in %q", ErrDataset, rttFile, r)
		}
		v, err := parseFloat(rttFile, r[2])
		if err != nil {
			return nil, nil, err
		}
		rtt[i][j], rtt[j][i] = v, v
	}
	// Drop, one at a time, the city with the most missing pairs (ties: the
	// later one in the file) until the matrix is complete.
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = true
	}
	for {
		worst, worstMissing := -1, 0
		for i := 0; i < n; i++ {
			if !keep[i] {
				continue
			}
			missing := 0
			for j := 0; j < n; j++ {
				if keep[j] && rtt[i][j] < 0 {
					missing++
				}
			}
			if missing > 0 && missing >= worstMissing {
				worst, worstMissing = i, missing
			}
		}
		if worst < 0 {
			break
		}
		keep[worst] = false
	}
	var idx []int
	var kept []Site
	full := &Matrix{Names: make([]string, n), RTT: rtt}
	for i, s := range sites {
		full.Names[i] = s.Name
		if keep[i] {
			idx = append(idx, i)
			kept = append(kept, s)
		}
	}
	return kept, full.Sub(idx), nil
}

// PlanetLab490 returns the 490-node PlanetLab RTT matrix (ms), symmetrised.
// The embedded file holds the upper triangle: line i lists RTT(i, j) for
// j = i+1 .. 489 (the last node's line is empty).
func PlanetLab490() (*Matrix, error) {
	const name = "planetlab490_rtt_upper.csv.gz"
	rows, err := readCSV(name) // the CSV reader skips the empty last line
	if err != nil {
		return nil, err
	}
	n := len(rows) + 1
	m := &Matrix{Names: make([]string, n), RTT: make([][]float64, n)}
	for i := range m.RTT {
		m.Names[i] = "pl" + strconv.Itoa(i)
		m.RTT[i] = make([]float64, n)
	}
	for i, r := range rows {
		if len(r) != n-1-i {
			return nil, fmt.Errorf("%w: %s: row %d has %d values, want %d", ErrDataset, name, i, len(r), n-1-i)
		}
		for k, s := range r {
			v, err := parseFloat(name, s)
			if err != nil {
				return nil, err
			}
			j := i + 1 + k
			m.RTT[i][j], m.RTT[j][i] = v, v
		}
	}
	return m, nil
}

// Sites loads a base-station site list: "melbourne" (real Optus sites in
// metropolitan Melbourne) or "atlanta" (a seeded synthetic set).
func Sites(dataset string) ([]Site, error) {
	var name string
	switch dataset {
	case "melbourne":
		name = "melbourne_optus_sites.csv"
	case "atlanta":
		name = "atlanta_sites_synthetic.csv"
	default:
		return nil, fmt.Errorf("%w: unknown site dataset %q (melbourne or atlanta)", ErrDataset, dataset)
	}
	rows, err := readCSV(name)
	if err != nil {
		return nil, err
	}
	sites := make([]Site, 0, len(rows)-1)
	for _, r := range rows[1:] {
		if len(r) < 3 {
			return nil, fmt.Errorf("%w: %s: short row", ErrDataset, name)
		}
		lat, err := parseFloat(name, r[1])
		if err != nil {
			return nil, err
		}
		lon, err := parseFloat(name, r[2])
		if err != nil {
			return nil, err
		}
		sites = append(sites, Site{Name: r[0], Lat: lat, Lon: lon})
	}
	return sites, nil
}
