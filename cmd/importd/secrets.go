package main

import (
	"fmt"
	"math"
)

// Least estimated entropy of the secrets importd is given. The estimate
// (secretBits) is an underestimate for random strings: 64 hex characters
// (openssl rand -hex 32) come out at 220 bits or more, 32 of them (rand -hex
// 16) at 86 or more (the least of 20,000 draws), and the weak values once
// accepted far below: 32 × "a" 10, "changeme" × 4 32, "password" 22.
const (
	// minTokenSecretBits: the access tokens' HMAC key; below it a key that
	// only looks long (a phrase repeated to 32 bytes) is refused.
	minTokenSecretBits = 80
	// minPasswordBits: the MONITORING_PASSWORD login, which a client may
	// guess at AUTH_FAILURE_LIMIT times per window from every address.
	minPasswordBits = 60
)

// secretBits estimates the entropy of s in bits, for refusing secrets that a
// person made up rather than generated. It reads s left to right as LZ77
// does: a run of 4 or more characters that already occurred earlier (the
// run may overlap its source, so "aaaa..." is one character and a run)
// costs what naming its place and length costs, and the remaining literal
// characters cost their empirical Shannon entropy, from their frequencies;
// a character that continues a step sequence of three ("abc", "987",
// "xxx") costs nothing.
// A repeated phrase, a run of one character and a short word all come out
// low; a generated secret comes out near its real entropy, a little under.
func secretBits(s string) float64 {
	const minRun = 4
	var literals []byte
	runs := 0
	for i := 0; i < len(s); {
		best := 0
		for j := 0; j < i; j++ {
			n := 0
			for i+n < len(s) && s[j+n] == s[i+n] {
				n++
			}
			best = max(best, n)
		}
		if best >= minRun {
			runs++
			i += best
			continue
		}
		// The third character of a step sequence ("abc", "321") and
		// those after it are predicted by the two before.
		if i >= 2 && int(s[i])-int(s[i-1]) == int(s[i-1])-int(s[i-2]) && abs(int(s[i])-int(s[i-1])) <= 1 {
			i++
			continue
		}
		literals = append(literals, s[i])
		i++
	}
	var freq [256]int
	for _, c := range literals {
		freq[c]++
	}
	bits := 0.0
	for _, f := range freq {
		if f > 0 {
			p := float64(f) / float64(len(literals))
			bits -= float64(f) * math.Log2(p)
		}
	}
	// A run is named by where it starts and how long it is.
	return bits + float64(runs)*2*math.Log2(float64(len(s)))
}

// weakSecret says why secret, the value of the variable name, is too weak
// to use, or returns "" when it is not; min is the least estimated entropy
// in bits and how says how to generate a good one.
func weakSecret(name, secret string, min float64, how string) string {
	if exampleSecrets[secret] {
		return fmt.Sprintf("%s: is a published example; generate one with %s", name, how)
	}
	if b := secretBits(secret); b < min {
		return fmt.Sprintf("%s: too easy to guess (about %.0f bits of entropy, want at least %.0f); generate one with %s", name, b, min, how)
	}
	return ""
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
