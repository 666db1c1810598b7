// Package admin holds the operator's catalogue: import suppliers, operations
// teams, products with their tariffs, and accounts marked to be skipped. These
// are set up by the service operator (importctl), not through the REST API.
package admin
