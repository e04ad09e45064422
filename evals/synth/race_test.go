//go:build race

package synth

// raceEnabled says the race detector is on, which makes writing a large
// model ten times slower.
const raceEnabled = true
