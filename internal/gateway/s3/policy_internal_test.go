package s3

import (
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// TestPolicyMatch: the policy language's wildcards, * any characters
// (slashes too) and ? one, with no other special character.
func TestPolicyMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		fold, want bool
	}{
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b/a/b/c", false, true},
		{"arn:aws:s3:::b/home/*", "arn:aws:s3:::b/home", false, false},
		{"arn:aws:s3:::b/home/*", "arn:aws:s3:::b/home/", false, true},
		{"arn:aws:s3:::b/?.txt", "arn:aws:s3:::b/a.txt", false, true},
		{"arn:aws:s3:::b/?.txt", "arn:aws:s3:::b/ab.txt", false, false},
		{"arn:aws:s3:::b/[a]", "arn:aws:s3:::b/[a]", false, true},
		{"arn:aws:s3:::b/[a]", "arn:aws:s3:::b/a", false, false},
		{"arn:aws:s3:::b/a\\b", "arn:aws:s3:::b/a\\b", false, true},
		{"s3:Get*", "s3:getobject", true, true},
		{"s3:Get*", "s3:PutObject", true, false},
		{"ARN:aws:s3:::b", "arn:aws:s3:::b", false, false},
		{"*", "anything/at/all", false, true},
	} {
		if got := policyMatch(c.pattern, c.s, c.fold); got != c.want {
			t.Errorf("policyMatch(%q, %q, %v) = %v", c.pattern, c.s, c.fold, got)
		}
	}
}

// TestPolicyDecide evaluates statements and conditions against requests,
// without a server.
func TestPolicyDecide(t *testing.T) {
	p, err := parseBucketPolicy([]byte(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/pub/*"},
		{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/pub/secret"},
		{"Effect":"Allow","Principal":{"AWS":"alice"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",
		 "Condition":{"StringLike":{"s3:prefix":"alice/*"},"NotIpAddress":{"aws:SourceIp":"192.0.2.0/24"}}},
		{"Effect":"Allow","Principal":{"AWS":"bob"},"NotAction":"s3:Delete*","NotResource":"arn:aws:s3:::b/private/*"},
		{"Effect":"Deny","Principal":{"AWS":"bob"},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
		 "Condition":{"StringNotEqualsIfExists":{"s3:x-amz-acl":"private"}}}]}`), "b")
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := gateway.Identity{ID: "alice"}, gateway.Identity{ID: "bob"}
	local := map[string]string{"aws:sourceip": "127.0.0.1"}
	with := func(k map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for a, b := range k {
			out[a] = b
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		name string
		r    policyRequest
		want decision
	}{
		{"anonymous public read", policyRequest{anon: true, action: "s3:GetObject", resource: "arn:aws:s3:::b/pub/a", keys: local}, allow},
		{"anonymous outside", policyRequest{anon: true, action: "s3:GetObject", resource: "arn:aws:s3:::b/priv/a", keys: local}, noDecision},
		{"deny wins", policyRequest{who: alice, action: "s3:GetObject", resource: "arn:aws:s3:::b/pub/secret", keys: local}, deny},
		{"anonymous is not alice", policyRequest{anon: true, action: "s3:ListBucket", resource: "arn:aws:s3:::b", keys: with(local, "s3:prefix", "alice/x")}, noDecision},
		{"alice lists her prefix", policyRequest{who: alice, action: "s3:ListBucket", resource: "arn:aws:s3:::b", keys: with(local, "s3:prefix", "alice/x")}, allow},
		{"alice lists without a prefix", policyRequest{who: alice, action: "s3:ListBucket", resource: "arn:aws:s3:::b", keys: local}, noDecision},
		{"alice from a refused network", policyRequest{who: alice, action: "s3:ListBucket", resource: "arn:aws:s3:::b", keys: map[string]string{"aws:sourceip": "192.0.2.7", "s3:prefix": "alice/"}}, noDecision},
		{"bob reads", policyRequest{who: bob, action: "s3:GetObject", resource: "arn:aws:s3:::b/x", keys: local}, allow},
		{"bob deletes (NotAction)", policyRequest{who: bob, action: "s3:DeleteObject", resource: "arn:aws:s3:::b/x", keys: local}, noDecision},
		{"bob in private (NotResource)", policyRequest{who: bob, action: "s3:GetObject", resource: "arn:aws:s3:::b/private/x", keys: local}, noDecision},
		// IfExists: a missing key makes the condition hold, so the Deny applies.
		{"bob puts without an ACL (IfExists)", policyRequest{who: bob, action: "s3:PutObject", resource: "arn:aws:s3:::b/x", keys: local}, deny},
		{"bob puts public", policyRequest{who: bob, action: "s3:PutObject", resource: "arn:aws:s3:::b/x", keys: with(local, "s3:x-amz-acl", "public-read")}, deny},
		{"bob puts private", policyRequest{who: bob, action: "s3:PutObject", resource: "arn:aws:s3:::b/x", keys: with(local, "s3:x-amz-acl", "private")}, allow},
	} {
		if got := p.decide(c.r); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if !p.public() {
		t.Error("a policy allowing * is public")
	}
}
