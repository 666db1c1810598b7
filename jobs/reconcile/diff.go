package reconcile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// PathDifference is one value that differs between the canonical form a
// cohort line gives and the one the service holds, at its path in the
// canonical form: members by name, list members by index or, in a list
// keyed by a member, by that key in brackets (pathKeys). Cohort and Service
// are the values' JSON encodings; nil when the member is absent on that
// side (a list member the other side does not have).
type PathDifference struct {
	Path    string          `json:"path"`
	Cohort  json.RawMessage `json:"cohort,omitempty"`
	Service json.RawMessage `json:"service,omitempty"`
}

// pathKeys are the lists whose members pair by a key of their own, because
// the canonical form sorts them by it: a transaction added or removed then
// shows as that one transaction, not as every later one shifted. The path
// names the member by its key (transactions[S1-T01].amount).
var pathKeys = map[string]string{
	"transactions": "transaction_id",
	"statements":   "statement_id",
	"metadata":     "name",
	"fields":       "name",
	"meter_type":   "name",
}

// unkeyedSets are the lists that have neither an order nor a key (the
// canonical form sorts them by their encoding): equal members pair first,
// the others then in order, so that a changed note is one difference at
// the index the cohort gives it, however the change moved it in the sort.
var unkeyedSets = map[string]bool{"notes": true, "payment_instructions": true}

// Diff returns every value of the two canonical forms that differs, in the
// order of the canonical form's members (list members in the cohort's
// order, then those only the service has). Both are compared as
// CohortCanonical and CanonicalFromView give them: lists in their canonical
// order, money with two places and other numbers as exact decimals, so
// 1.50 and 1.5 are one amount. Lists that keep the payload's order
// (customers, supply addresses and points, meters, registers, readings,
// agreements, user details, phone numbers, document paths) pair by
// position: a reordering is a change, as the digest says. None when the
// two digests are equal.
func Diff(cohort, service Canonical) []PathDifference {
	c, s := mustJSON(cohort.normalised()), mustJSON(service.normalised())
	if bytes.Equal(c, s) {
		return nil
	}
	cv, err := decodeOrdered(c)
	if err != nil {
		panic("reconcile: decode canonical form: " + err.Error())
	}
	sv, err := decodeOrdered(s)
	if err != nil {
		panic("reconcile: decode canonical form: " + err.Error())
	}
	var out []PathDifference
	diffValue(&out, "", "", cv, sv)
	return out
}

// object is a JSON object with its members in their encoded order.
type object []member

type member struct {
	name  string
	value any
}

func (o object) get(name string) (any, bool) {
	for _, m := range o {
		if m.name == name {
			return m.value, true
		}
	}
	return nil, false
}

// decodeOrdered decodes JSON into object, []any, json.Number, string, bool
// and nil, keeping the order of members.
func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return decodeValue(dec)
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var o object
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o = append(o, member{k.(string), v})
			}
			_, err := dec.Token()
			return o, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

// encodeOrdered is the compact JSON of a decodeOrdered value.
func encodeOrdered(v any) json.RawMessage {
	var b bytes.Buffer
	var enc func(v any)
	enc = func(v any) {
		switch x := v.(type) {
		case object:
			b.WriteByte('{')
			for i, m := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				b.Write(mustJSON(m.name))
				b.WriteByte(':')
				enc(m.value)
			}
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(e)
			}
			b.WriteByte(']')
		case json.Number:
			b.WriteString(x.String())
		default:
			b.Write(mustJSON(x))
		}
	}
	enc(v)
	return b.Bytes()
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// diffValue appends the differences of c and s at path; name is the
// member's name (the list's, for its members' pairing).
func diffValue(out *[]PathDifference, path, name string, c, s any) {
	co, cok := c.(object)
	so, sok := s.(object)
	if cok && sok {
		for _, m := range co {
			sv, ok := so.get(m.name)
			if !ok {
				*out = append(*out, PathDifference{Path: join(path, m.name), Cohort: encodeOrdered(m.value)})
				continue
			}
			diffValue(out, join(path, m.name), m.name, m.value, sv)
		}
		for _, m := range so {
			if _, ok := co.get(m.name); !ok {
				*out = append(*out, PathDifference{Path: join(path, m.name), Service: encodeOrdered(m.value)})
			}
		}
		return
	}
	cl, cok := c.([]any)
	sl, sok := s.([]any)
	if cok && sok {
		diffList(out, path, name, cl, sl)
		return
	}
	ce, se := encodeOrdered(c), encodeOrdered(s)
	if !bytes.Equal(ce, se) {
		*out = append(*out, PathDifference{Path: path, Cohort: ce, Service: se})
	}
}

// diffList pairs the members of two lists as name's kind of list wants
// (pathKeys, unkeyedSets, else by position) and compares each pair.
func diffList(out *[]PathDifference, path, name string, c, s []any) {
	if key, ok := pathKeys[name]; ok && diffKeyed(out, path, key, c, s) {
		return
	}
	cIdx, sIdx := make([]int, 0, len(c)), make([]int, 0, len(s))
	if unkeyedSets[name] {
		// Equal members pair first; the rest pair in order.
		used := make([]bool, len(s))
		var restC []int
		for i, v := range c {
			e := encodeOrdered(v)
			found := false
			for j, w := range s {
				if !used[j] && bytes.Equal(e, encodeOrdered(w)) {
					used[j], found = true, true
					break
				}
			}
			if !found {
				restC = append(restC, i)
			}
		}
		cIdx = restC
		for j := range s {
			if !used[j] {
				sIdx = append(sIdx, j)
			}
		}
	} else {
		for i := range c {
			cIdx = append(cIdx, i)
		}
		for j := range s {
			sIdx = append(sIdx, j)
		}
	}
	n := min(len(cIdx), len(sIdx))
	for k := 0; k < n; k++ {
		diffValue(out, join(path, strconv.Itoa(cIdx[k])), "", c[cIdx[k]], s[sIdx[k]])
	}
	for _, i := range cIdx[n:] {
		*out = append(*out, PathDifference{Path: join(path, strconv.Itoa(i)), Cohort: encodeOrdered(c[i])})
	}
	for _, j := range sIdx[n:] {
		*out = append(*out, PathDifference{Path: join(path, strconv.Itoa(j)), Service: encodeOrdered(s[j])})
	}
}

// diffKeyed pairs the members of two lists by their member key and
// compares each pair; false (and nothing appended) when a member lacks the
// key or the service repeats one, which is not what the service stores: the
// caller pairs them by position then.
func diffKeyed(out *[]PathDifference, path, key string, c, s []any) bool {
	keyOf := func(v any) (string, bool) {
		o, ok := v.(object)
		if !ok {
			return "", false
		}
		k, ok := o.get(key)
		ks, isString := k.(string)
		return ks, ok && isString
	}
	index := make(map[string]int, len(s))
	for j, v := range s {
		k, ok := keyOf(v)
		if _, dup := index[k]; !ok || dup {
			return false
		}
		index[k] = j
	}
	keys := make([]string, len(c))
	for i, v := range c {
		k, ok := keyOf(v)
		if !ok {
			return false
		}
		keys[i] = k
	}
	paired := make([]bool, len(s))
	for i, v := range c {
		p := path + "[" + keys[i] + "]"
		if j, ok := index[keys[i]]; ok && !paired[j] {
			paired[j] = true
			diffValue(out, p, "", v, s[j])
			continue
		}
		*out = append(*out, PathDifference{Path: p, Cohort: encodeOrdered(v)})
	}
	for j, v := range s {
		if !paired[j] {
			k, _ := keyOf(v)
			*out = append(*out, PathDifference{Path: path + "[" + k + "]", Service: encodeOrdered(v)})
		}
	}
	return true
}
