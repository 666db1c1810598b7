package main

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn/match"
	"github.com/trustelem/zxcvbn/matching"
	"github.com/trustelem/zxcvbn/scoring"
)

// Least estimated bits of the secrets importd is given (secretBits). The
// estimate is an underestimate for random strings, as zxcvbn takes any
// character it cannot explain as one of 10. Over 20,000 draws each, the
// least was 170 bits for 64 hex characters (openssl rand -hex 32), 112 for
// 44 base64 ones (openssl rand -base64 32), 69 for 32 hex characters
// (openssl rand -hex 16) and 66 for 32 base64 ones (openssl rand -base64
// 24); TestConfig_GeneratedSecretsAreAccepted prints them. A phrase of
// words, a repeated phrase, a keyboard walk or a common password comes out
// far below: "thequickbrownfoxjumpsoverthelazydog" at 0,
// "correcthorsebatterystaple" at 4.
const (
	// minTokenSecretBits: the access tokens' HMAC key, which anyone holding
	// a token can attack offline at the speed of SHA-256.
	minTokenSecretBits = 80
	// minPasswordBits: the MONITORING_PASSWORD login, which is guessed
	// online, AUTH_FAILURE_LIMIT times per window from an address.
	minPasswordBits = 60
)

// estimatedBytes is how much of a secret secretBits reads: zxcvbn's time
// grows faster than the square of the length (1,000 bytes take seconds),
// and 128 random bytes already carry several times minTokenSecretBits.
const estimatedBytes = 128

// wordDictionaries are zxcvbn's lists of words and names, and the secret's
// related values (its user inputs).
var wordDictionaries = map[string]bool{
	"english_wikipedia": true, "us_tv_and_film": true, "female_names": true, "male_names": true, "surnames": true,
	"user_inputs": true,
}

// secretBits estimates, in bits, how much of secret a guesser cannot
// predict. zxcvbn (Dropbox's estimator, in trustelem's Go port, which gives
// the same matches and guesses as its release 4.4.2) finds every way to
// spell parts of secret with what password crackers try: common passwords,
// English words and names, keyboard walks, sequences, repeats, dates, and
// related (the user name and the other secrets), and prices each in
// guesses. Here a word or a name written as people write words (three
// letters or more, in lower case, upper case or capitalised), and any of
// related, costs nothing, and each further part of the spelling costs no
// more than its own guesses. zxcvbn itself prices words as if drawn at
// random and charges every further part 10,000 guesses, so it puts
// "thequickbrownfoxjumpsoverthelazydog" at 94 bits; but a famous phrase is
// one guess from a list of phrases, and a secret made of words is one a
// person chose, not one that was generated. The cheapest spelling is
// zxcvbn's own search, and the estimate is what it leaves: characters no
// pattern explains, and the other patterns at zxcvbn's price. Short runs
// of letters that happen to be words ("b37", "aTIR") keep their price, or
// random strings would lose a fifth of their estimate. Only the first
// estimatedBytes of secret are read; a secret that is not UTF-8 is 0.
func secretBits(secret string, related []string) float64 {
	if !utf8.ValidString(secret) {
		return 0
	}
	if len(secret) > estimatedBytes {
		secret = strings.ToValidUTF8(secret[:estimatedBytes], "")
	}
	var inputs []string
	for _, r := range related {
		// A value of one or two characters would be found at random in
		// any secret and discount it for nothing.
		if len(r) >= 3 {
			inputs = append(inputs, r)
		}
	}
	matches := matching.Omnimatch(secret, inputs)
	for _, m := range matches {
		if freeWord(m) {
			m.Guesses = 1 // zxcvbn keeps a price once set
		}
	}
	bits := 0.0
	for _, m := range scoring.MostGuessableMatchSequence(secret, matches, true).Sequence {
		if !freeWord(m) {
			bits += math.Log2(m.Guesses)
		}
	}
	return bits
}

// freeWord says whether m is a part of a secret that secretBits counts as
// nothing: one of the related values, or a word or name of three letters
// or more in the shape people write words.
func freeWord(m *match.Match) bool {
	if m.Pattern != "dictionary" || !wordDictionaries[m.DictionaryName] {
		return false
	}
	if m.DictionaryName == "user_inputs" {
		return true
	}
	t := m.Token
	if utf8.RuneCountInString(t) < 3 || strings.ContainsFunc(t, func(r rune) bool { return !unicode.IsLetter(r) }) {
		return false
	}
	_, size := utf8.DecodeRuneInString(t)
	rest := t[size:]
	return t == strings.ToLower(t) || t == strings.ToUpper(t) || rest == strings.ToLower(rest)
}

// secret is a value of the configuration that must stay secret, or the
// login that goes with one, for checking that none is reused.
type secret struct {
	// name names the value as the operator sets it: a variable, or "the
	// password of DATABASE_URL".
	name, value string
}

// weakSecret says why s is too weak to use, or returns "" when it is not:
// a published example, the same as another of others (a login's user name,
// or another secret, whose leak would then give both away), or below min
// estimated bits once the parts that repeat others are discounted. how
// says how to generate a good one.
func weakSecret(s secret, others []secret, min float64, how string) string {
	if exampleSecrets[s.value] {
		return fmt.Sprintf("%s: is a published example; generate one with %s", s.name, how)
	}
	if !utf8.ValidString(s.value) {
		return fmt.Sprintf("%s: is not UTF-8 text; generate one with %s", s.name, how)
	}
	var related []string
	for _, o := range others {
		if o.value == "" {
			continue
		}
		if o.value == s.value {
			return fmt.Sprintf("%s: is the same as %s; generate each secret on its own, with %s", s.name, o.name, how)
		}
		related = append(related, o.value)
	}
	if b := secretBits(s.value, related); b < min {
		return fmt.Sprintf("%s: too easy to guess (about %.0f bits that no word, name, pattern or other setting explains, want at least %.0f); generate one with %s",
			s.name, b, min, how)
	}
	return ""
}
