# Shared parts of the suites that start a skua of their own over TLS or SASL (ssl, sasl,
# acls): openssl certificates, the broker's stop, every case reported at once. Source
# after common.sh and cases.sh, don't execute. The suite sets D (its temporary dir, where
# the files go), PASS (the PKCS12 stores' password), CASES ("ID FUNCTION ARGS..." each)
# and skua_pid once its broker runs.
# shellcheck shell=bash

# tls_ca NAME SUBJECT: a self-signed CA, D/NAME.key and D/NAME.pem.
tls_ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/$1.key" -out "$D/$1.pem" -days 2 -subj "$2"
}

# tls_broker_cert: D/broker.pem, .key and .p12 for 127.0.0.1 and localhost, signed by D/ca.pem.
tls_broker_cert() {
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$D/broker.ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$D/broker.key" -out "$D/broker.csr" -subj "/CN=broker" || return 1
  openssl x509 -req -in "$D/broker.csr" -CA "$D/ca.pem" -CAkey "$D/ca.key" -CAcreateserial -out "$D/broker.pem" \
    -days 2 -extfile "$D/broker.ext" || return 1
  openssl pkcs12 -export -in "$D/broker.pem" -inkey "$D/broker.key" -name broker -passout "pass:$PASS" -out "$D/broker.p12"
}

# tls_client_cert NAME SUBJECT [CA]: a client certificate, D/NAME.pem and .key (PEM, as
# librdkafka, kafka-python, franz-go and kafkajs read them) and D/NAME.p12 (for Java),
# signed by D/CA.pem (default: ca).
tls_client_cert() {
  local ca=${3:-ca}
  # With extensions, so the certificate is X.509 v3 (webpki, as most verifiers, refuses v1).
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' >"$D/client.ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$D/$1.key" -out "$D/$1.csr" -subj "$2" || return 1
  openssl x509 -req -in "$D/$1.csr" -CA "$D/$ca.pem" -CAkey "$D/$ca.key" -CAcreateserial -out "$D/$1.pem" \
    -days 2 -extfile "$D/client.ext" || return 1
  openssl pkcs12 -export -in "$D/$1.pem" -inkey "$D/$1.key" -name "$1" -passout "pass:$PASS" -out "$D/$1.p12"
}

# tls_truststore: D/trust.p12 holding D/ca.pem, for the Java clients.
tls_truststore() {
  keytool -importcert -noprompt -alias ca -file "$D/ca.pem" -storetype PKCS12 -storepass "$PASS" -keystore "$D/trust.p12"
}

# report_all STATUS REASON: every case of CASES reported so (a suite that cannot start).
report_all() {
  local c
  for c in "${CASES[@]}"; do echo "$1 ${c%% *}: $2"; done
}

# suite_cleanup: stops the suite's broker (SIGTERM, then SIGKILL after 10 s) and removes D.
suite_cleanup() {
  if [[ -n ${skua_pid:-} ]]; then
    kill "$skua_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$skua_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$skua_pid" 2>/dev/null
  fi
  rm -rf "$D" "${CASE_TMP:-}"  # (this trap replaces cases.sh's, which removed CASE_TMP)
}
