package qos

import "fmt"

func newPressure(cfg Config) (Controller, error) {
	return nil, fmt.Errorf("qos pressure: %w", errNotYet)
}
