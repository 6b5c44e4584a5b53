package qos

import (
	"fmt"
	"math"
)

func newLoad(cfg Config) (Controller, error) {
	for _, threshold := range []struct {
		flag string
		v    float64
	}{{"-qos-load-5min", cfg.Load5}, {"-qos-load-15min", cfg.Load15}} {
		if err := checkThreshold(KindLoad, threshold.flag, threshold.v, math.MaxFloat64); err != nil {
			return nil, err
		}
	}
	if cfg.Load5 == 0 && cfg.Load15 == 0 {
		return nil, fmt.Errorf("qos load: needs -qos-load-5min or -qos-load-15min")
	}
	return nil, fmt.Errorf("qos load: %w", errNotYet)
}
