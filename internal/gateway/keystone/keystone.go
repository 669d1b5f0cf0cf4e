// Package keystone is the gateway's identity service for OpenStack
// clients (layer 5): projects and their users, tokens that expire and can
// be revoked, and the endpoints of the gateways that serve object storage,
// each in its region. It answers TempAuth's v1.0 request and Keystone v3
// password authentication with a service catalog.
//
// Everything is kept in the gateway's registry (gateway.Records), not in
// memory: a token issued by one gateway is valid at every gateway that
// shares the registry, and a gateway restarted keeps its users. Passwords
// are kept as bcrypt hashes and tokens as their SHA-256, so the registry
// holds no secret a client could replay.
package keystone

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Record sets of the registry this package keeps.
const (
	setProjects  = "swift-projects"
	setUsers     = "swift-users"
	setTokens    = "swift-tokens"
	setEndpoints = "swift-endpoints"
)

// Errors of the identity service.
var (
	ErrUnauthorized = errors.New("keystone: the request you have made requires authentication")
	ErrNoProject    = errors.New("keystone: no such project")
	ErrExists       = errors.New("keystone: already exists")
	ErrBadName      = errors.New("keystone: invalid name")
)

// DefaultTTL is how long a token lives unless Config.TokenTTL says.
const DefaultTTL = time.Hour

// Config configures the identity service.
type Config struct {
	// TokenTTL is how long a token lives; default DefaultTTL.
	TokenTTL time.Duration
	// Now is the clock; default time.Now (tests move it).
	Now func() time.Time
	// Cost is bcrypt's cost for new passwords; default bcrypt.DefaultCost.
	Cost int
}

// Service keeps projects, users, tokens and endpoints in a gateway's
// registry.
type Service struct {
	gw  *gateway.Gateway
	cfg Config
}

// New returns the identity service of gw.
func New(gw *gateway.Gateway, cfg Config) *Service {
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Cost == 0 {
		cfg.Cost = bcrypt.DefaultCost
	}
	return &Service{gw: gw, cfg: cfg}
}

// TTL returns how long the tokens the service issues live.
func (s *Service) TTL() time.Duration { return s.cfg.TokenTTL }

// Project is a tenant: one Swift account. Its containers are the buckets
// its access key may read.
type Project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Key is the S3 access key the project acts as: buckets it creates
	// are owned by it, and it sees the buckets the key is granted.
	Key     string            `json:"key"`
	Meta    map[string]string `json:"meta,omitempty"` // account metadata, keys lower-case
	Created time.Time         `json:"created"`
}

// Account returns the project's Swift account name.
func (p Project) Account() string { return "AUTH_" + p.ID }

// User is a person or program that authenticates in one project.
type User struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Project string    `json:"project"` // project name
	Hash    string    `json:"hash"`    // bcrypt of the password
	Created time.Time `json:"created"`
}

// Token is an issued token, as the registry keeps it (under the SHA-256
// of its secret).
type Token struct {
	UserID    string    `json:"user_id"`
	User      string    `json:"user"`
	ProjectID string    `json:"project_id"`
	Project   string    `json:"project"`
	Methods   []string  `json:"methods"`
	Issued    time.Time `json:"issued"`
	Expires   time.Time `json:"expires"`
	AuditID   string    `json:"audit_id"`
}

// Endpoint is a gateway serving object storage, in the catalog.
type Endpoint struct {
	ID       string    `json:"id"`
	Region   string    `json:"region"`
	Public   string    `json:"public"`   // base URL clients use, e.g. https://swift.r1.example:8080
	Internal string    `json:"internal"` // base URL inside the region; Public if empty
	Updated  time.Time `json:"updated"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// CheckName reports whether a project or user name is usable: 1-64 of
// letters, digits, . _ @ -, starting with a letter or digit.
func CheckName(n string) error {
	if !nameRE.MatchString(n) {
		return fmt.Errorf("%w: %q (1-64 of letters, digits, . _ @ -, starting with a letter or digit)", ErrBadName, n)
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Service) get(ctx context.Context, set, name string, v any) (bool, error) {
	raw, err := s.gw.Record(ctx, set, name)
	if err != nil || raw == nil {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("keystone: %s/%s: %w", set, name, err)
	}
	return true, nil
}

func (s *Service) put(ctx context.Context, set, name string, v any) error {
	b, _ := json.Marshal(v)
	return s.gw.PutRecord(ctx, set, name, b)
}

// AddProject makes project name acting as S3 access key key.
func (s *Service) AddProject(ctx context.Context, name, key string) (Project, error) {
	if err := CheckName(name); err != nil {
		return Project{}, err
	}
	var p Project
	if ok, err := s.get(ctx, setProjects, name, &p); err != nil || ok {
		if ok {
			err = fmt.Errorf("%w: project %q", ErrExists, name)
		}
		return p, err
	}
	if _, err := s.gw.Key(ctx, key); err != nil {
		return p, fmt.Errorf("keystone: access key %q: %w", key, err)
	}
	p = Project{ID: randHex(16), Name: name, Key: key, Created: s.cfg.Now().UTC()}
	return p, s.put(ctx, setProjects, name, p)
}

// Project returns a project by name.
func (s *Service) Project(ctx context.Context, name string) (Project, error) {
	var p Project
	if CheckName(name) != nil {
		return p, ErrNoProject
	}
	ok, err := s.get(ctx, setProjects, name, &p)
	if err == nil && !ok {
		err = ErrNoProject
	}
	return p, err
}

// PutProject stores a changed project (its metadata).
func (s *Service) PutProject(ctx context.Context, p Project) error {
	return s.put(ctx, setProjects, p.Name, p)
}

// Projects lists the projects, by name.
func (s *Service) Projects(ctx context.Context) ([]Project, error) {
	recs, err := s.gw.Records(ctx, setProjects)
	if err != nil {
		return nil, err
	}
	var out []Project
	for _, raw := range recs {
		var p Project
		if json.Unmarshal(raw, &p) == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// AddUser makes user name of a project with a password (a random one if
// empty, returned).
func (s *Service) AddUser(ctx context.Context, project, name, password string) (User, string, error) {
	if err := CheckName(name); err != nil {
		return User{}, "", err
	}
	if _, err := s.Project(ctx, project); err != nil {
		return User{}, "", fmt.Errorf("%w: %q", err, project)
	}
	var u User
	if ok, err := s.get(ctx, setUsers, project+":"+name, &u); err != nil || ok {
		if ok {
			err = fmt.Errorf("%w: user %s:%s", ErrExists, project, name)
		}
		return u, "", err
	}
	if password == "" {
		password = randHex(16)
	}
	if len(password) > 72 {
		return u, "", fmt.Errorf("keystone: a password is at most 72 bytes")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), s.cfg.Cost)
	if err != nil {
		return u, "", err
	}
	u = User{ID: randHex(16), Name: name, Project: project, Hash: string(h), Created: s.cfg.Now().UTC()}
	return u, password, s.put(ctx, setUsers, project+":"+name, u)
}

// DeleteUser removes a user; tokens it holds stay valid until they
// expire or are revoked.
func (s *Service) DeleteUser(ctx context.Context, project, name string) error {
	var u User
	if ok, err := s.get(ctx, setUsers, project+":"+name, &u); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("keystone: no user %s:%s", project, name)
		}
		return err
	}
	return s.gw.DeleteRecord(ctx, setUsers, project+":"+name)
}

// Users lists the users, as PROJECT:USER.
func (s *Service) Users(ctx context.Context) ([]User, error) {
	recs, err := s.gw.Records(ctx, setUsers)
	if err != nil {
		return nil, err
	}
	var out []User
	for _, raw := range recs {
		var u User
		if json.Unmarshal(raw, &u) == nil {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Project+":"+out[i].Name < out[j].Project+":"+out[j].Name })
	return out, nil
}

// Authenticate checks a user's password and issues a token scoped to the
// user's project: it returns the token and its secret. Any failure
// (unknown project or user, wrong password) is ErrUnauthorized.
func (s *Service) Authenticate(ctx context.Context, project, name, password, method string) (Token, string, error) {
	var u User
	if CheckName(project) != nil || CheckName(name) != nil {
		return Token{}, "", ErrUnauthorized
	}
	ok, err := s.get(ctx, setUsers, project+":"+name, &u)
	if err != nil {
		return Token{}, "", err
	}
	if !ok {
		// As long as a wrong password, so timing does not tell which
		// users exist.
		bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return Token{}, "", ErrUnauthorized
	}
	if bcrypt.CompareHashAndPassword([]byte(u.Hash), []byte(password)) != nil {
		return Token{}, "", ErrUnauthorized
	}
	p, err := s.Project(ctx, project)
	if errors.Is(err, ErrNoProject) {
		return Token{}, "", ErrUnauthorized
	}
	if err != nil {
		return Token{}, "", err
	}
	now := s.cfg.Now().UTC()
	t := Token{UserID: u.ID, User: u.Name, ProjectID: p.ID, Project: p.Name, Methods: []string{method},
		Issued: now, Expires: now.Add(s.cfg.TokenTTL), AuditID: randHex(8)}
	secret := "qtk" + randHex(24)
	return t, secret, s.put(ctx, setTokens, tokenName(secret), t)
}

var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such user"), bcrypt.MinCost)

func tokenName(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Verify returns the token whose secret a request carries. An unknown,
// revoked or expired token is ErrUnauthorized; the registry is asked,
// not a cache, so a token revoked at another gateway is refused here as
// soon as the revocation reaches this one.
func (s *Service) Verify(ctx context.Context, secret string) (Token, error) {
	var t Token
	if len(secret) < 8 || len(secret) > 256 {
		return t, ErrUnauthorized
	}
	ok, err := s.get(ctx, setTokens, tokenName(secret), &t)
	if err != nil {
		return t, err
	}
	if !ok {
		return t, ErrUnauthorized
	}
	if !s.cfg.Now().Before(t.Expires) {
		// Expired: forget it (best effort).
		s.gw.DeleteRecord(ctx, setTokens, tokenName(secret))
		return t, ErrUnauthorized
	}
	return t, nil
}

// Prune removes the records of expired tokens (Verify removes those it
// meets; this finds the ones nobody presents again). It returns how many
// it removed.
func (s *Service) Prune(ctx context.Context) (int, error) {
	recs, err := s.gw.Records(ctx, setTokens)
	if err != nil {
		return 0, err
	}
	now, n := s.cfg.Now(), 0
	for name, raw := range recs {
		var t Token
		if json.Unmarshal(raw, &t) == nil && now.Before(t.Expires) {
			continue
		}
		if err := s.gw.DeleteRecord(ctx, setTokens, name); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// Revoke makes a token invalid everywhere.
func (s *Service) Revoke(ctx context.Context, secret string) error {
	if _, err := s.Verify(ctx, secret); err != nil {
		return err
	}
	return s.gw.DeleteRecord(ctx, setTokens, tokenName(secret))
}

// Register records (or refreshes) the endpoint of a gateway. Its ID is
// derived from its public URL, so a gateway started again replaces its
// own entry.
func (s *Service) Register(ctx context.Context, e Endpoint) (Endpoint, error) {
	if CheckName(e.Region) != nil {
		return e, fmt.Errorf("%w: region %q", ErrBadName, e.Region)
	}
	if e.Public == "" {
		return e, fmt.Errorf("keystone: an endpoint needs a public URL")
	}
	if e.Internal == "" {
		e.Internal = e.Public
	}
	h := sha256.Sum256([]byte(e.Public))
	e.ID = hex.EncodeToString(h[:16])
	e.Updated = s.cfg.Now().UTC()
	return e, s.put(ctx, setEndpoints, e.ID, e)
}

// Unregister removes an endpoint from the catalog.
func (s *Service) Unregister(ctx context.Context, id string) error {
	return s.gw.DeleteRecord(ctx, setEndpoints, id)
}

// Endpoints lists the registered endpoints, by region then URL.
func (s *Service) Endpoints(ctx context.Context) ([]Endpoint, error) {
	recs, err := s.gw.Records(ctx, setEndpoints)
	if err != nil {
		return nil, err
	}
	var out []Endpoint
	for _, raw := range recs {
		var e Endpoint
		if json.Unmarshal(raw, &e) == nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Region != out[j].Region {
			return out[i].Region < out[j].Region
		}
		return out[i].Public < out[j].Public
	})
	return out, nil
}
