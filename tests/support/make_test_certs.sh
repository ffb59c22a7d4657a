#!/usr/bin/env bash
# Certificates for the tls:// tests, made fresh in DIR with openssl(1):
#   ca.pem ca.key           the test CA
#   server.pem server.key   CN=server, for 127.0.0.1 and localhost, by the CA
#   alice.pem alice.key     a client, CN=alice, by the CA
#   bob.pem bob.key         a client, CN=bob, by the CA
#   expired.pem             the server's key, a certificate that has expired
#   elsewhere.pem           the server's key, for host other.example only
#   rogue.pem rogue.key     CN=alice, by another CA (rogue-ca.pem)
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "make_test_certs: failed: $*" >&2; "$@"; exit 1; }; }
newkey() { quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
# sign NAME CN DAYS SAN CA: NAME.pem for key NAME.key (or the key given
# by KEY=), signed by CA.pem/CA.key.
sign() {
  local name=$1 cn=$2 days=$3 san=$4 ca=$5 key=${KEY:-$1.key}
  quiet openssl req -new -key "$key" -subj "/CN=$cn" -out "$name.csr"
  printf 'subjectAltName=%s\n' "$san" > "$name.ext"
  quiet openssl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial \
    -days "$days" -extfile "$name.ext" -out "$name.pem"
  rm -f "$name.csr" "$name.ext"
}
for ca in ca rogue-ca; do
  newkey $ca.key
  quiet openssl req -x509 -new -key $ca.key -subj "/CN=pagefile test $ca" -days 30 -out $ca.pem
done
for k in server alice bob rogue; do newkey $k.key; done
sign server server 30 "IP:127.0.0.1,DNS:localhost" ca
sign alice alice 30 "DNS:alice" ca
sign bob bob 30 "DNS:bob" ca
sign rogue alice 30 "DNS:alice" rogue-ca
KEY=server.key sign expired server -1 "IP:127.0.0.1,DNS:localhost" ca
KEY=server.key sign elsewhere server 30 "DNS:other.example" ca
chmod 600 ./*.key
