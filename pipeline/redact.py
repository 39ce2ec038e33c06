"""Secret redaction applied to every text value before anything is written.

Three detectors, each replacing what it finds by ``[REDACTED:<kind>]`` so a reader can still see that
something was there and what it was:

- **known token formats** (``_TOKENS``): GitHub, AWS, Slack, OpenAI, Anthropic, Google, Stripe, ... keys
  whose shape names them, whatever surrounds them (the formats of gitleaks' and GitHub secret scanning's
  rules);
- **named values** (``_named_values``): a value whose name says it is secret - ``password=...``,
  ``"apiKey": "..."``, ``DB_PASS=...`` on an ``.env`` line, ``X-API-Key: ...`` in a header,
  ``--password ...`` on a command line, ``?token=...`` in a URL, ``user:password@`` in any URI (also
  percent-encoded) - unless the value is a placeholder (``${VAR}``, ``changeme``, ``<your-key>``), a
  reference (``$env:X``, ``process.env.X``, ``argv[i]``), a path, or code (``Read-Host``, a call, a
  member, an unquoted name in a line of code);
- **structure** (``Redactor.structure``): in parsed JSON, the value of a key that names a secret
  (``{"client_secret": "..."}``, an MCP server's ``env``/``headers``), and the item after a flag that
  names one in an argument list (``["--api-key", "..."]``).

A text goes through the rules only when one RE2 pass of ``LINE_SCREEN`` (every rule relaxed to a
superset) finds a candidate; then each rule is tried only where one of its anchors occurs.
tests/test_secrets_corpus.py measures recall and precision on a labelled corpus.
"""

from __future__ import annotations

import base64
import bisect
import re
from collections import Counter

import re2  # google-re2: linear-time, one pass for all the screens below, compiled once

# ------------------------------------------------------------------------------------------ token formats
# (kind, pattern, anchors): every match starts at one of the anchors (lower-case literals). The text is
# searched for anchors with str.find, and the pattern is only tried where one occurs: a long tool output
# with no anchor costs a few C-speed scans.
# a command's argument: quoted (spaces and all) or a word, not another option
_CMD_VALUE = r"(?P<q>\\*[\"'])?(?P<v>(?(q)[^\"'\r\n\\]{1,256}|(?!-)[^\s\"'\\;|&<>]{1,256}))"
# the rest of the command a name starts, up to the option that follows it (not past a line, a pipe or a `;`)
_IN_COMMAND = r"[^\r\n|;&]{0,300}?[ \t]"
_NETRC_SEP = r"(?:[ \t]+|[ \t]*(?:\r?\n|(?:\\+r)?\\+n)[ \t]*)"  # a line break written out too (`\n` in JSON)
# a word that makes a name a secret's (the screen's named values, a Terraform variable's name, a setting's default)
_SECRET_RUN = r"(?i:pass|pwd|secret|token|key|auth|credential|creds|cookie|sig|pin|connection[_.-]?string)"
# a command that reads a secret from its input, up to where the secret is given (here-string) or read (a pipe)
_STDIN_SECRET = (r"(?:\bsudo[ \t]+(?:-[A-Za-z]+[ \t]+)*-[A-Za-z]*S\b|\bkinit\b"
                 r"|\b(?:ch)?passwd\b[^\r\n|;&]{0,100}?--stdin|\bvercel[ \t]+env[ \t]+add\b|\bnpm[ \t]+login\b"
                 r"|--password-stdin\b|--with-token\b|\bop[ \t]+signin\b"
                 r"|\bgcloud[ \t]+secrets[ \t]+versions[ \t]+add\b[^\r\n|;&]{0,200}?--data-file[ \t=]+-(?!\S))")

_TOKENS: list[tuple[str, str, tuple[str, ...]]] = [
    ("private_key", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
                    r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)", ("-----begin",)),
    ("github_token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ("github_pat", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", ("github_pat_",)),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b", ("akia", "asia", "abia", "acca", "a3t")),
    # dash-separated alphanumeric groups, at least 3 characters; written so that no two ways of splitting
    # a run exist (a nested `(?:[A-Za-z0-9]+-?){2,}` took minutes on a long run without a word boundary)
    ("slack_token", r"\bxox[abposr]-(?=[A-Za-z0-9]-?[A-Za-z0-9]-?[A-Za-z0-9])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\b",
     ("xox",)),
    ("slack_token", r"\bxapp-\d-[A-Z0-9]+-\d+-[a-f0-9]{32,}\b", ("xapp-",)),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{20,}",
     ("https://hooks.slack",)),
    ("discord_webhook", r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[\w-]{20,}",
     ("https://discord", "https://ptb.discord", "https://canary.discord")),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,8192}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,8192}", ("eyj",)),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,1024}T3BlbkFJ[A-Za-z0-9_-]{20,1024}\b", ("sk-",)),
    # current OpenAI project, service-account and admin keys carry no T3BlbkFJ marker
    ("openai_key", r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,1024}", ("sk-proj-", "sk-svcacct-", "sk-admin-")),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}\b", ("sk-ant-",)),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{34,40}\b", ("hf_",)),
    ("gitlab_token", r"\bgl(?:pat|dt|rt|ptt|ft|imt|agent|oas|cbt|soat)-[A-Za-z0-9_-]{20,64}",
     ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glimt-", "glagent-", "gloas-", "glcbt-", "glsoat-")),
    ("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_-]{24,40}", ("gocspx-",)),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b", ("aiza",)),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b", ("sk_live_", "sk_test_", "rk_live_", "rk_test_")),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",)),
    ("pypi_token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", ("pypi-ageicHlwaS5vcmc".lower(),)),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b", ("sg.",)),
    ("twilio_key", r"\bSK[0-9a-fA-F]{32}\b", ("sk",)),
    ("discord_token", r"\b[MNO][A-Za-z\d_-]{23,27}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,40}\b", ("m", "n", "o")),
    ("telegram_bot_token", r"(?<=\d{8}):(?P<v>AA[A-Za-z0-9_-]{33})\b", (":aa",)),
    ("digitalocean_token", r"\bdo[opr]_v1_[a-f0-9]{64}\b", ("dop_v1_", "doo_v1_", "dor_v1_")),
    ("docker_token", r"\bdckr_pat_[A-Za-z0-9_-]{27,}", ("dckr_pat_",)),
    ("vault_token", r"\bhv[sb]\.[A-Za-z0-9_-]{24,}", ("hvs.", "hvb.")),
    ("databricks_token", r"\bdapi[a-f0-9]{32}(?:-\d)?\b", ("dapi",)),
    ("shopify_token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", ("shpat_", "shpca_", "shppa_", "shpss_")),
    ("linear_key", r"\blin_api_[A-Za-z0-9]{40}\b", ("lin_api_",)),
    ("doppler_token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}\b", ("dp.",)),
    ("atlassian_token", r"\bATATT3[A-Za-z0-9_=-]{150,}", ("atatt3",)),
    ("grafana_token", r"\bgl(?:sa|c)_[A-Za-z0-9_+/=-]{32,}", ("glsa_", "glc_")),
    ("newrelic_key", r"\bNRAK-[A-Z0-9]{27}\b", ("nrak-",)),
    ("postman_key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", ("pmak-",)),
    ("age_secret_key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b", ("age-secret-key-1",)),
    ("azure_storage_key", r"(?i:accountkey|sharedaccesskey)[ \t]*=[ \t]*(?P<v>[A-Za-z0-9+/]{40,}={0,2})",
     ("accountkey", "sharedaccesskey")),
    ("azure_sas", r"[?&]sig=(?P<v>[A-Za-z0-9%+/=]{20,})", ("?sig=", "&sig=")),
    # curl / wget / httpie basic credentials: -u user:password, --user=user:password
    # (in JSON text its quote is escaped: `-u \"user:password\"`, and the value stops at the escape)
    ("cli_credentials", r"(?:-[uU]|--user|--http-user|--proxy-user)(?:[ \t]+|=)(?:\\*[\"'])?[^\s:\"'@\\]{1,128}:"
                        r"(?P<v>[^\s\"'@\\]{4,256})", ("-u", "--user", "--http-user", "--proxy-user")),
    # a password given to a command by an option only that command reads so (`-p` is a port or a path elsewhere):
    # sshpass -p, mysql's -p<password> (its -p alone prompts), docker login -p, openssl's pass:, htpasswd -b's
    # last argument, ssh-keygen -N, gh secret set --body
    ("command_secret", r"\bsshpass[ \t]+(?:-[^p\s]\S*[ \t]+)*-p[ \t]*" + _CMD_VALUE, ("sshpass",)),
    ("command_secret", r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b"
                       + _IN_COMMAND + r"-p" + _CMD_VALUE, ("mysql", "mariadb")),
    ("command_secret", r"\b(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]+registry|az)[ \t]+login\b"
                       + _IN_COMMAND + r"-p(?:[ \t]+|=)" + _CMD_VALUE,
     ("docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm", "az")),
    # MongoDB's tools' -p, redis-cli's -a, sqlcmd's and bcp's -P, twine upload -p, nuget push -k, smbclient's
    # -U user%password, net use's password before /user:, and a token given to cargo login or vault login
    ("command_secret", r"\bmongo(?:sh|dump|restore|export|import|stat|top)?\b" + _IN_COMMAND + r"-p(?:[ \t]+|=)?"
                       + _CMD_VALUE, ("mongo",)),
    ("command_secret", r"\bredis-cli\b" + _IN_COMMAND + r"-a[ \t]+" + _CMD_VALUE, ("redis-cli",)),
    ("command_secret", r"\b(?:sqlcmd|bcp)\b" + _IN_COMMAND + r"-P[ \t]*" + _CMD_VALUE, ("sqlcmd", "bcp")),
    ("command_secret", r"\btwine[ \t]+upload\b" + _IN_COMMAND + r"-p(?:[ \t]+|=)" + _CMD_VALUE, ("twine",)),
    ("command_secret", r"\bnuget[ \t]+push\b" + _IN_COMMAND + r"-k[ \t]+" + _CMD_VALUE, ("nuget",)),
    ("command_secret", r"\b(?:smbclient|rpcclient|smbget)\b[^\r\n|;&]{0,300}?(?:-U|--user)(?:[ \t]+|=)"
                       r"\\*[\"']?[^\s%\"']+%"
                       + _CMD_VALUE, ("smbclient", "rpcclient", "smbget")),
    ("command_secret", r"\bnet[ \t]+use[ \t]+(?:[A-Za-z]:[ \t]+)?\\{2,}[^\s\"']+[ \t]+" + _CMD_VALUE
                       + r"(?=\\*[\"']?[ \t]+/u(?:ser)?:)", ("net ",)),
    ("command_secret", r"\b(?:cargo|vault)[ \t]+login[ \t]+(?:--registry(?:[ \t]+|=)\S+[ \t]+)?(?!-)" + _CMD_VALUE,
     ("cargo", "vault")),
    # package managers' stored credentials: poetry's and composer's http-basic <repo> <user> <password>, bundler's
    # <host> <user>:<password>
    ("command_secret", r"\b(?:poetry|composer)[ \t]+config\b[^\r\n|;&]{0,100}?http-basic\.\S+[ \t]+[^\s-]\S*[ \t]+"
                       + _CMD_VALUE, ("poetry", "composer")),
    ("command_secret", r"\bbundle[ \t]+config[ \t]+(?:set[ \t]+)?(?:--(?:global|local)[ \t]+)?[^\s-]\S*[ \t]+"
                       r"\\*[\"']?[^\s:\"'\\]+:" + _CMD_VALUE, ("bundle",)),
    # LDAP tools' -w, PsExec's -p, net user's password, a Key Vault secret's or an SSM SecureString's
    # --value, nmcli's and wpa_passphrase's, mysqladmin password, htpasswd -nb, dotnet user-secrets set, Redis's
    # requirepass and masterauth, rabbitmqctl add_user / change_password, openssl passwd, `echo user:pw | chpasswd`
    ("command_secret", r"\bldap(?:search|add|modify|delete|passwd|compare|whoami|modrdn|exop)\b" + _IN_COMMAND
                       + r"-w[ \t]+" + _CMD_VALUE, ("ldap",)),
    ("command_secret", r"\bpsexec(?:64)?(?:\.exe)?\b" + _IN_COMMAND + r"-p[ \t]+" + _CMD_VALUE, ("psexec",)),
    ("command_secret", r"\bnet[ \t]+user[ \t]+[^\s/]+[ \t]+(?!/)" + _CMD_VALUE, ("net ",)),
    ("command_secret", r"\baz[ \t]+keyvault[ \t]+secret[ \t]+set\b" + _IN_COMMAND + r"--value(?:[ \t]+|=)"
                       + _CMD_VALUE, ("az ",)),
    ("command_secret", r"\baws[ \t]+ssm[ \t]+put-parameter\b(?=[^\r\n|;&]{0,300}SecureString)[^\r\n|;&]{0,300}?"
                       r"[ \t]--value(?:[ \t]+|=)" + _CMD_VALUE, ("aws ",)),
    ("command_secret", r"\bnmcli\b" + _IN_COMMAND + r"(?:password|wifi-sec\.psk)[ \t]+" + _CMD_VALUE, ("nmcli",)),
    ("command_secret", r"\bwpa_passphrase[ \t]+\S+[ \t]+" + _CMD_VALUE, ("wpa_passphrase",)),
    ("command_secret", r"\bmysqladmin\b" + _IN_COMMAND + r"password[ \t]+" + _CMD_VALUE, ("mysqladmin",)),
    ("command_secret", r"\bhtpasswd[ \t]+-(?=[A-Za-z]*n)(?=[A-Za-z]*b)[A-Za-z]+[ \t]+(?:-[A-Za-z]+[ \t]+)*"
                       r"[^\s-]\S*[ \t]+" + _CMD_VALUE, ("htpasswd",)),
    ("command_secret", r"\bdotnet[ \t]+user-secrets[ \t]+set[ \t]+\S+[ \t]+" + _CMD_VALUE, ("dotnet",)),
    ("command_secret", r"\b(?:requirepass|masterauth)[ \t]+(?!-)" + _CMD_VALUE, ("requirepass", "masterauth")),
    ("command_secret", r"\brabbitmqctl[ \t]+(?:add_user|change_password)[ \t]+\S+[ \t]+" + _CMD_VALUE,
     ("rabbitmqctl",)),
    ("command_secret", r"\bopenssl[ \t]+passwd\b(?:[ \t]+-(?:salt[ \t]+\S+|(?!salt\b)\S+))*[ \t]+" + _CMD_VALUE,
     ("openssl",)),
    ("command_secret", r"\becho[ \t]+(?:-\w+[ \t]+)?\\*[\"']?[^\s:\"'\\]{1,64}:(?P<v>[^\s\"'\\]{1,256})"
                       r"\\*[\"']?[ \t]*\|[ \t]*(?:sudo[ \t]+)?chpasswd\b", ("echo",)),
    # lftp -u user,password, Perforce's -P, 7-Zip's and RAR's -p<password>, zip's and unzip's -P,
    # openssl's -k, cqlsh's -p, Oracle's user/password@db, nuget add source -p
    ("command_secret", r"\blftp\b" + _IN_COMMAND + r"-u[ \t]+[^\s,]+," + _CMD_VALUE, ("lftp",)),
    ("command_secret", r"\bp4\b" + _IN_COMMAND + r"-P[ \t]+" + _CMD_VALUE, ("p4",)),
    ("command_secret", r"\b(?:7z[az]?|(?:un)?rar)\b" + _IN_COMMAND + r"-p" + _CMD_VALUE, ("7z", "rar", "unrar")),
    ("command_secret", r"\b(?:zip|unzip)\b" + _IN_COMMAND + r"-P[ \t]+" + _CMD_VALUE, ("zip", "unzip")),
    ("command_secret", r"\bopenssl\b" + _IN_COMMAND + r"-k[ \t]+" + _CMD_VALUE, ("openssl",)),
    ("command_secret", r"\bcqlsh\b" + _IN_COMMAND + r"-p[ \t]+" + _CMD_VALUE, ("cqlsh",)),
    ("command_secret", r"\b(?:sqlplus|sqlldr|expdp|impdp|rman|dgmgrl)[ \t]+(?:-\w+[ \t]+)*[^\s/@'\"\\]+/"
                       r"(?P<v>[^\s@/\"'\\]{1,256})", ("sqlplus", "sqlldr", "expdp", "impdp", "rman", "dgmgrl")),
    ("command_secret", r"\bnuget[ \t]+(?:add|update)[ \t]+source\b" + _IN_COMMAND + r"-p[ \t]+" + _CMD_VALUE,
     ("nuget",)),
    # rabbitmqadmin's -p, doctl's token, MinIO's `mc alias set <alias> <url> <access key> <secret key>`
    ("command_secret", r"\brabbitmqadmin\b" + _IN_COMMAND + r"-p[ \t]+" + _CMD_VALUE, ("rabbitmqadmin",)),
    ("command_secret", r"\bdoctl[ \t]+auth[ \t]+init\b" + _IN_COMMAND + r"-t[ \t]+" + _CMD_VALUE, ("doctl",)),
    ("command_secret", r"\bmc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)(?:[ \t]+(?!-)[^\s\"'\\]+){3}[ \t]+"
                       + _CMD_VALUE, ("mc",)),
    # a secret written to a command that reads one from its input: a here-string (`gh auth login --with-token <<<
    # ...`, `sudo -S <<< ...`) or echo/printf piped to it (`echo ... | docker login --password-stdin`)
    ("command_secret", _STDIN_SECRET + r"[^\r\n|;&]{0,300}?<<<[ \t]*" + _CMD_VALUE,
     ("sudo", "kinit", "passwd", "chpasswd", "vercel", "npm", "--", "op ", "gcloud")),
    ("command_secret", r"\b(?:echo|printf)[ \t]+(?:-[A-Za-z]+[ \t]+)*(?:\\*[\"'][^\"'\r\n]*%[^\"'\r\n]*\\*[\"'][ \t]+)?"
                       + _CMD_VALUE + r"\\*[\"']?[ \t]*\|[ \t]*(?=" + _STDIN_SECRET
                       + r"|[^\r\n|;&]{0,300}?(?:--password-stdin|--with-token)\b)",
     ("echo", "printf")),
    # a Terraform variable named for a secret, its default in its block (`variable "db_password" { default = "..." }`)
    ("command_secret", r"\bvariable[ \t]+\\*\"(?P<n>[\w-]*" + _SECRET_RUN + r"[\w-]*)\\*\"[ \t]*\{[^{}]{0,500}?"
                       r"\bdefault[ \t]*=[ \t]*" + _CMD_VALUE, ("variable",)),
    # SQL: CREATE/ALTER USER ... PASSWORD '...', IDENTIFIED BY '...', SET PASSWORD = PASSWORD('...')
    ("sql_password", r"(?i:\b(?:password|identified[ \t]+by))[ \t]*=?[ \t]*(?i:password[ \t]*)?\(?[ \t]*"
                     r"(?P<q>\\*')(?P<v>[^'\\\r\n]{1,256})(?P=q)", ("password", "identified")),
    # PowerShell's ConvertTo-SecureString of a literal (-AsPlainText)
    ("command_secret", r"\b(?i:ConvertTo-SecureString[ \t]+(?:-String[ \t]+)?)" + _CMD_VALUE,
     ("convertto-securestring",)),
    ("command_secret", r"-pass(?:in|out)?[ \t]+pass:" + _CMD_VALUE, ("-pass",)),
    ("command_secret", r"\bhtpasswd(?=[^\r\n]{0,100}?[ \t]-[A-Za-z]*b)[ \t]+(?:-[A-Za-z]+[ \t]+)+"
                       r"[^\s-]\S*[ \t]+\S+[ \t]+" + _CMD_VALUE, ("htpasswd",)),
    ("command_secret", r"\bssh-keygen\b" + _IN_COMMAND + r"-N[ \t]+" + _CMD_VALUE, ("ssh-keygen",)),
    ("command_secret", r"\bgh[ \t]+secret[ \t]+set\b" + _IN_COMMAND + r"(?:--body|-b)(?:[ \t]+|=)" + _CMD_VALUE,
     ("gh",)),
    # .netrc: `machine host login name password secret`, on one line or each on its own
    ("netrc_password", r"\bmachine[ \t]+[^\s\\]+" + _NETRC_SEP + r"login[ \t]+[^\s\\]+" + _NETRC_SEP + r"password[ \t]+"
     + _CMD_VALUE, ("machine",)),
    # Python requests' basic credentials: auth=('user', 'secret'), HTTPBasicAuth('user', 'secret'); .NET's
    # NetworkCredential("user", "secret")
    ("code_credentials", r"(?:\bauth[ \t]*=[ \t]*\(|\bHTTP(?:Basic|Digest)Auth\(|\bNetworkCredential(?:\]::new)?\()"
                         r"[ \t]*"
                         r"(?P<q1>\\*[\"'])[^\"'\\\r\n]{0,128}(?P=q1)[ \t]*,[ \t]*"
                         r"(?P<q>\\*[\"'])(?P<v>[^\"'\\\r\n]{1,256})(?P=q)",
     ("auth", "httpbasicauth(", "httpdigestauth(", "networkcredential")),
    # a signing or encryption key given as a literal: jwt.encode(payload, '...'), hmac.new(b'...'), Fernet(b'...')
    ("code_credentials", r"\bjwt\.(?:encode|decode)\([^,()\r\n]{1,128},[ \t]*b?(?P<q>\\*[\"'])"
                         r"(?P<v>[^\"'\\\r\n]{1,256})(?P=q)", ("jwt.",)),
    ("code_credentials", r"\b(?:hmac\.new|Fernet)\([ \t]*b?(?P<q>\\*[\"'])(?P<v>[^\"'\\\r\n]{1,256})(?P=q)",
     ("hmac.new(", "fernet(")),
    # a setting read with a literal default (django-environ's env('SECRET_KEY', default='...'))
    ("code_credentials", r"\([ \t]*\\*[\"'](?P<n>[\w.-]*" + _SECRET_RUN + r"[\w.-]*)\\*[\"'][ \t]*,[^()\r\n]{0,100}?"
                         r"\bdefault[ \t]*=[ \t]*(?P<q>\\*[\"'])(?P<v>[^\"'\\\r\n]{1,256})(?P=q)", ("(",)),
    # smtplib's, ftplib's, imaplib's login(user, '...')
    ("code_credentials", r"\.login\([^,()\r\n]{1,128},[ \t]*(?P<q>\\*[\"'])(?P<v>[^\"'\\\r\n]{1,256})(?P=q)",
     (".login(",)),
    # an HTTP Cookie header's value (session ids), whole
    ("cookie", r"(?i:\b(?:set-)?cookie)[ \t]*:[ \t]*(?P<v>[^\r\n\"'\\]{0,4096}=[^\r\n\"'\\]{8,4096})",
     ("cookie", "set-cookie")),
    # an API key in a URL query named only `key` or `appid` (Google's, OpenWeather's): a random run
    ("url_key", r"[?&](?:key|appid)=(?P<v>[A-Za-z0-9_%.~+/-]{16,512}=*)", ("?key=", "&key=", "?appid=", "&appid=")),
]
# kinds whose match keeps all but its group `v` (the name stays, the value goes)
# more token formats that name themselves by a prefix: (kind, pattern, anchors, the line screen's part). The
# shapes of gitleaks' default rules (github.com/gitleaks/gitleaks, config/gitleaks.toml) for the services a
# developer's agent meets, and of AI providers' keys it lacks (Groq, xAI, OpenRouter, Replicate, LangSmith,
# DeepSeek: the formats their consoles issue). Public keys meant for browsers (Mapbox pk., PostHog phc_) are left.
# A screen part is a prefix and at most 16 characters counted: a count is copied into RE2's program that many times
_PREFIXED: list[tuple[str, str, tuple[str, ...], str]] = [
    ("perplexity_key", r"\bpplx-[A-Za-z0-9]{48}\b", ("pplx-",), r"pplx-[A-Za-z0-9]{16}"),
    ("groq_key", r"\bgsk_[A-Za-z0-9]{48,56}\b", ("gsk_",), r"gsk_[A-Za-z0-9]{16}"),
    ("xai_key", r"\bxai-[A-Za-z0-9]{70,90}\b", ("xai-",), r"xai-[A-Za-z0-9]{16}"),
    ("openrouter_key", r"\bsk-or-v1-[a-f0-9]{64}\b", ("sk-or-v1-",), r"sk-or-v1-[a-f0-9]{16}"),
    ("deepseek_key", r"\bsk-[a-f0-9]{32}\b", ("sk-",), r"sk-[a-f0-9]{16}"),
    ("replicate_token", r"\br8_[A-Za-z0-9]{37}\b", ("r8_",), r"r8_[A-Za-z0-9]{16}"),
    ("langsmith_key", r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}\b", ("lsv2_",), r"lsv2_(?:pt|sk)_[a-f0-9]{16}"),
    ("google_oauth_token", r"\bya29\.[0-9A-Za-z_-]{20,2048}", ("ya29.",), r"ya29\.[0-9A-Za-z_-]{16}"),
    ("pulumi_token", r"\bpul-[a-f0-9]{40}\b", ("pul-",), r"pul-[a-f0-9]{16}"),
    ("planetscale_token", r"\bpscale_(?:tkn|oauth|pw)_[\w=.-]{32,64}", ("pscale_",), r"pscale_(?:tkn|oauth|pw)_"),
    ("sentry_token", r"\bsntry[su]_[A-Za-z0-9+/=_]{40,400}", ("sntrys_", "sntryu_"), r"sntry[su]_[A-Za-z0-9+/=_]{16}"),
    ("notion_token", r"\bntn_\d{11}[A-Za-z0-9]{35}\b", ("ntn_",), r"ntn_\d{11}[A-Za-z0-9]{16}"),
    ("airtable_token", r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}\b", ("pat",), r"pat[A-Za-z0-9]{14}\.[a-f0-9]{16}"),
    ("flyio_token", r"\b(?:fo1_[\w-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,4096}={0,3})", ("fo1_", "fm1", "fm2"),
     r"fo1_[\w-]{16}|fm[12][ar]?_[A-Za-z0-9+/]{16}"),
    ("heroku_key", r"\bHRKU-AA[0-9A-Za-z_-]{58}\b", ("hrku-aa",), r"HRKU-AA[0-9A-Za-z_-]{16}"),
    ("cloudflare_origin_ca_key", r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}\b", ("v1.0-",), r"v1\.0-[a-f0-9]{16}"),
    ("prefect_token", r"\bpnu_[A-Za-z0-9]{36}\b", ("pnu_",), r"pnu_[A-Za-z0-9]{16}"),
    ("rubygems_token", r"\brubygems_[a-f0-9]{48}\b", ("rubygems_",), r"rubygems_[a-f0-9]{16}"),
    ("readme_token", r"\brdme_[a-z0-9]{70}\b", ("rdme_",), r"rdme_[a-z0-9]{16}"),
    ("sendinblue_key", r"\bxkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}\b", ("xkeysib-",), r"xkeysib-[a-f0-9]{16}"),
    # (a run of one letter, base64 of zeros, is no token: a digit and a lower-case letter in it)
    ("square_token", r"\b(?:EAAA|sq0atp-|sq0csp-)(?=[\w-]{0,59}\d)(?=[\w-]{0,59}[a-z])[\w-]{22,60}\b",
     ("eaaa", "sq0atp-", "sq0csp-"), r"(?:EAAA|sq0atp-|sq0csp-)[\w-]{16}"),
    ("shippo_token", r"\bshippo_(?:live|test)_[a-fA-F0-9]{40}\b", ("shippo_",), r"shippo_(?:live|test)_"),
    ("infracost_token", r"\bico-[A-Za-z0-9]{32}\b", ("ico-",), r"ico-[A-Za-z0-9]{16}"),
    ("artifactory_key", r"\bAKCp[A-Za-z0-9]{69}\b", ("akcp",), r"AKCp[A-Za-z0-9]{16}"),
    ("tailscale_key", r"\btskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}", ("tskey-",),
     r"tskey-(?:auth|api|client|scim|webhook)-"),
    ("onepassword_token", r"\bops_eyJ[A-Za-z0-9+/]{250,8192}={0,3}", ("ops_eyj",), r"ops_eyJ[A-Za-z0-9+/]{16}"),
    ("aws_bedrock_key", r"\bABSK[A-Za-z0-9+/]{109,269}={0,2}", ("absk",), r"ABSK[A-Za-z0-9+/]{16}"),
    ("facebook_token", r"\bEAA[MC](?=[A-Za-z0-9]{0,99}\d)(?=[A-Za-z0-9]{0,99}[a-z])[A-Za-z0-9]{100,1024}",
     ("eaam", "eaac"), r"EAA[MC][A-Za-z0-9]{16}"),
    ("dynatrace_token", r"\bdt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}\b", ("dt0c01.",), r"dt0c01\.[A-Za-z0-9]{16}"),
    ("easypost_key", r"\bEZ[AT]K[A-Za-z0-9]{54}\b", ("ezak", "eztk"), r"EZ[AT]K[A-Za-z0-9]{16}"),
    ("openshift_token", r"\bsha256~[\w-]{43}(?![\w-])", ("sha256~",), r"sha256~[\w-]{16}"),
    ("sourcegraph_token", r"\bsgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}\b", ("sgp_",), r"sgp_[a-zA-Z0-9]{16}"),
    ("clickhouse_key", r"\b4b1d[A-Za-z0-9]{38}\b", ("4b1d",), r"4b1d[A-Za-z0-9]{16}"),
    ("alibaba_key", r"\bLTAI[A-Za-z0-9]{20}\b", ("ltai",), r"LTAI[A-Za-z0-9]{16}"),
    ("huggingface_token", r"\bapi_org_[A-Za-z]{34}\b", ("api_org_",), r"api_org_[A-Za-z]{16}"),
    ("grafana_token", r"\beyJrIjoi[A-Za-z0-9]{70,400}={0,3}", ("eyjrijoi",), r"eyJrIjoi[A-Za-z0-9]{16}"),
    ("mapbox_secret_token", r"\bsk\.eyJ1Ijoi[A-Za-z0-9_-]{20,512}\.[A-Za-z0-9_-]{20,64}", ("sk.eyj1ijoi",),
     r"sk\.eyJ1Ijoi[A-Za-z0-9_-]{16}"),
    ("posthog_personal_key", r"\bphx_[A-Za-z0-9]{43}\b", ("phx_",), r"phx_[A-Za-z0-9]{16}"),
    ("resend_key", r"\bre_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}\b", ("re_",), r"re_[A-Za-z0-9]{8}_[A-Za-z0-9]{16}"),
    ("figma_token", r"\bfigd_[A-Za-z0-9_-]{40,64}", ("figd_",), r"figd_[A-Za-z0-9_-]{16}"),
    ("neon_key", r"\bnapi_[a-z0-9]{64}\b", ("napi_",), r"napi_[a-z0-9]{16}"),
    ("render_key", r"\brnd_[A-Za-z0-9]{32}\b", ("rnd_",), r"rnd_[A-Za-z0-9]{16}"),
    ("supabase_token", r"\bsbp_[a-f0-9]{40}\b", ("sbp_",), r"sbp_[a-f0-9]{16}"),
    ("hubspot_token", r"\bpat-(?:na|eu)\d-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", ("pat-",),
     r"pat-(?:na|eu)\d-[0-9a-f]{8}-"),
    ("notion_token", r"\bsecret_[A-Za-z0-9]{43}\b", ("secret_",), r"secret_[A-Za-z0-9]{16}"),
    ("google_oauth_token", r"(?<![\w/])1//0[0-9A-Za-z_-]{40,512}", ("1//0",), r"1//0[0-9A-Za-z_-]{16}"),
    ("twitch_token", r"\boauth:[a-z0-9]{30}\b", ("oauth:",), r"oauth:[a-z0-9]{16}"),
]
_TOKENS += [(kind, pattern, anchors) for kind, pattern, anchors, _screen in _PREFIXED]
_VALUE_KINDS = {"azure_storage_key", "azure_sas", "cli_credentials", "telegram_bot_token", "command_secret",
                "sql_password", "netrc_password", "code_credentials", "cookie", "url_key"}
# ... of which the value is judged as a named value's is (``secret_value``; ``url_key``: a random run only;
# ``cookie``: the value of one of its cookies)
_JUDGED_KINDS = {"command_secret", "netrc_password", "code_credentials", "url_key", "cookie", "sql_password",
                 "cli_credentials"}
_COMPILED: list[tuple] = []  # (kind, pattern, anchors) of each rule of _TOKENS, compiled when first needed


def _compiled() -> list[tuple]:
    """The token rules, compiled on the first text the screen flags: compiling them all took 30 ms of each run's
    start, a run that reads nothing new included."""
    if not _COMPILED:
        _COMPILED[:] = [(kind, re.compile(pat), anchors) for kind, pat, anchors in _TOKENS]
    return _COMPILED

# ------------------------------------------------------------------------------------------ named values
# A name says its value is secret when one of its words is one of these (camelCase, snake_case, kebab-case,
# dotted: `DB_PASSWORD`, `clientSecret`, `X-API-Key`, `joplin.token`, `--auth-token`) ...
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pass", "pwd", "secret", "token",
                           "credential", "credentials", "creds", "auth", "authorization", "cookie", "sig",
                           "apikey", "passcode", "pin",
                           # keytool's and jarsigner's options, Redis's directives: one word each
                           "storepass", "keypass", "srcstorepass", "deststorepass", "srckeypass", "destkeypass",
                           "requirepass", "masterauth"})
# ... words that are English too: a secret only in a name of several words or in capitals (`DB_PASS`,
# `authCookie`, `PIN`), not alone in prose ("when all pass: ...")
_WEAK_WORDS = frozenset({"pass", "pin", "sig", "auth", "cookie", "creds"})
# ... or two adjacent ones are one of these pairs (`api_key`, `PRIVATE_KEY`, `encryptionKey`, `AccountKey`)
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"),
                           ("encryption", "key"), ("signing", "key"), ("master", "key"), ("account", "key"),
                           ("client", "key"), ("session", "key"), ("app", "key"), ("license", "key"),
                           ("shared", "key"), ("service", "key"), ("consumer", "key"), ("subscription", "key"),
                           ("connection", "string"), ("sas", "key"), ("admin", "key"), ("deploy", "key"),
                           ("auth", "key"), ("nonce", "key")})  # WordPress's AUTH_KEY, NONCE_KEY
# ... unless its last word says it is about the secret, not the secret itself (`PASSWORD_FILE`,
# `max_tokens`, `token_count`, `secretName`, `TOKEN_URL`) ...
_ABOUT_WORDS = frozenset({"file", "files", "path", "paths", "dir", "url", "uri", "endpoint", "host", "name", "names",
                          "id", "ids", "type", "types", "count", "counts", "length", "len", "size", "limit",
                          "limits", "max", "min", "env", "var", "hint", "prompt", "label", "field", "fields",
                          "policy", "expiry", "expires", "expiration", "ttl", "timeout", "header", "prefix",
                          "suffix", "format", "regex", "pattern", "required", "enabled", "disabled", "mode",
                          "kind", "source", "usage", "used", "budget", "index", "idx", "tokens", "ref", "refs",
                          "key", "keys", "store", "manager", "provider", "helper", "service", "class", "method",
                          "scheme", "strategy", "flow", "version", "location", "region", "scope", "scopes",
                          "issuer", "audience", "algorithm", "alg", "reset", "changed", "change",
                          "valid", "invalid", "expired", "check", "validation", "rotation", "arn", "vault",
                          "hash", "hashed", "digest", "fingerprint", "checksum", "salt", "strength", "score", "input",
                          "placeholder", "button", "modal", "form", "dialog", "component", "request", "thru",
                          "through", "handler"})
# ... or a word before the secret word says it is not a credential (a C# `CancellationToken`, a pager's
# `nextToken`, a tokenizer's `eos_token`, the shell's `PWD` and `OLDPWD`)
_NOT_CREDENTIAL = frozenset({"cancellation", "cancel", "next", "page", "continuation", "sync", "cursor", "max",
                             "num", "total", "input", "output", "prompt", "completion", "reasoning", "cached",
                             "cache", "special", "eos", "bos", "pad", "unk", "mask", "sep", "cls", "start", "end",
                             "stop", "design", "color", "spacing", "lexer", "parser", "old", "bypass", "compass",
                             "first", "last", "previous", "prev", "current", "csrf", "xsrf", "anti", "forgery",
                             "is", "has", "use", "show", "hide", "remember", "forgot", "new", "confirm"})
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-$")
# where a secret name may be: every secret word, and the first word of the pairs whose second is no secret word
_ANCHORS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "creds", "cookie", "sig", "pin",
            "connection")


# ... and a word in capitals that ends with one of these is two words run together, as environment variables
# are named (`PGPASSWORD`, PostgreSQL's; `AUTHTOKEN`, `NPMTOKEN`), unless what comes before says it is no
# credential (`NEXTTOKEN`)
_FUSED = ("password", "passwd", "passphrase", "passcode", "secret", "token", "apikey")


def _unfused(word: str) -> list[str]:
    """A word in capitals that runs a prefix and a secret word together, as the two; any other word as it is."""
    if len(word) > 1 and word.isupper():
        low = word.lower()
        for tail in _FUSED:
            if low.endswith(tail) and len(low) > len(tail):
                return [low[:-len(tail)], tail]
    return [word.lower()]


def secret_name(name: str) -> bool:
    """Whether a name (a key, a variable, an option, a header) says its value is a secret."""
    words = [w for raw in _WORD.findall(name) for w in _unfused(raw)]
    if not words or words[-1] in _ABOUT_WORDS and not (len(words) > 1 and (words[-2], words[-1]) in _SECRET_PAIRS):
        return False
    for i, w in enumerate(words):
        pair = i + 1 < len(words) and (w, words[i + 1]) in _SECRET_PAIRS
        if (w in _SECRET_WORDS or pair) and not (i and words[i - 1] in _NOT_CREDENTIAL):
            if w in _WEAK_WORDS and not pair and len(words) == 1 and not name.isupper():
                continue
            return not (w == "pwd" and len(words) == 1 and name.isupper())  # PWD: the shell's working folder
    return False


# A value that is no secret: a placeholder, a reference to one, a path, code
_PLACEHOLDER = re.compile(
    r"^(?:\*+|[xX]+|\.{3,}|…|-+|_+|#+|0+|<[^<>]*>|\[[^\[\]]*\]|%[A-Za-z_][\w]*%"
    r"|\$\(?[A-Za-z_][\w.:]*\)?|@[A-Za-z_]\w*@|\[REDACTED:[a-z_]+\]"
    r"|(?:your|sua|seu|tua|teu|votre|dein|deine|replace|change|insert|enter|put|add|paste|set|fill|example"
    r"|sample|dummy|fake|test|placeholder|redacted|secret|password|token|todo|tbd|fixme|none|null|nil|true|false|foobared"
    r"|undefined|default|empty|unset|required|optional|string|value|abc|foo|bar|baz)(?:[\W_].*)?"
    r"|.*(?:\.\.\.|…|\$\{|\{\{|your[_-]|[_-](?:here|aqui|ici|hier)$|changeme|change[_-]me|placeholder|xxxx"
    r"|\*\*\*).*)$", re.IGNORECASE | re.DOTALL)
_REFERENCE = re.compile(
    r"^(?:\$|%|process\.env|os\.environ|os\.getenv|getenv|env[.:\[(]|System\.getenv|Environment\.|ENV\[|config[.\[]"
    r"|settings\.|self\.|this\.|args?\.|argv|options?\.|opts\.|params?\.|props\.|ctx\.|context\.|request\.|req\."
    r"|secrets\.|vars\.|inputs\.|github\.|new\b|await\b|function\b|lambda\b|None\b|null\b|true\b|false\b)",
    re.IGNORECASE)
_VERB_NOUN = re.compile(r"^[A-Z][A-Za-z]+-[A-Z][A-Za-z]+$")  # a PowerShell cmdlet: Read-Host, ConvertTo-SecureString
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CJK = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uff00-\uffef]")
# a run no one would name a variable: letters and digits mixed, or 16 hex digits or more, six of them digits
_RANDOM_RUN = re.compile(r"^(?:(?=(?:[^0-9]*[0-9]){3})(?=(?:[^A-Za-z]*[A-Za-z]){3})[A-Za-z0-9_]{12,}"
                         r"|(?=(?:[^0-9]*[0-9]){6})[0-9a-fA-F]{16,})$")
_MEMBER = re.compile(r"^[A-Za-z_$]+(?:\.[A-Za-z_$]+)+$")  # names without digits: a secret has some
# base64 of 16 characters or more, digits and letters among them (Docker's `"auth"`: base64 of user:password), or
# padded as base64 is (a password's base64 may hold one digit or none)
_BASE64ISH = re.compile(r"^(?:(?=(?:[^0-9]*[0-9]){2})(?=(?:[^A-Za-z]*[A-Za-z]){6})[A-Za-z0-9+/_-]{16,}={0,2}"
                        r"|(?=(?:[^A-Za-z]*[A-Za-z]){6})(?:[A-Za-z0-9+/]{4}){3,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=))$")


def random_value(value: str) -> bool:
    """A value no one would write: a run of letters and digits mixed, hex digits, base64 (of `user:password` too)."""
    return bool(_RANDOM_RUN.match(value) or _BASE64ISH.match(value)) or _basic_credentials(value)


_BASE64 = re.compile(r"^[A-Za-z0-9+/]{12,}={0,2}$")


def _basic_credentials(value: str) -> bool:
    """Whether ``value`` is base64 of `user:password` (Docker's `"auth"`, .npmrc's `_auth`), whatever digits it
    holds: its base64 may hold one or none."""
    if not _BASE64.match(value):
        return False
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return False
    user, sep, password = raw.partition(":")
    return bool(sep and user and password) and raw.isprintable()


def weak_name(name: str) -> bool:
    """A name that is one of the weak secret words alone (`auth`, `_auth`, `sig`, `pin`): its value is a secret
    only when it is a random run (``random_value``): Docker's `"auth": "<base64>"`, .npmrc's `_auth=`."""
    words = _WORD.findall(name)
    return len(words) == 1 and words[0].lower() in _WEAK_WORDS


def _named_secret(name: str, value: str) -> bool:
    """Whether ``value``, named ``name`` (a JSON key, a name/value pair's name), is a secret."""
    if name.lower() in ("cookie", "set-cookie"):
        return _judged_secret("cookie", value)
    if secret_name(name):
        return secret_value(value, True, True)
    return weak_name(name) and random_value(value)


# a JSON object that pairs a name with a value (see _JSON_NAME)
_NAME_KEYS = ("name", "Name", "key", "Key", "ParameterKey", "variable", "Variable")
_VALUE_KEYS = ("value", "Value", "ParameterValue", "default", "defaultValue", "DefaultValue")


def _paired_secret(obj: dict) -> str | None:
    """The key holding a secret in an object that pairs a name with a value (`{"name": "DB_PASSWORD", "value":
    "..."}`, `{"ParameterKey": ..., "ParameterValue": ...}`), or None."""
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None:
        return None
    key = next((k for k in _VALUE_KEYS if isinstance(obj.get(k), str)), None)
    return key if key is not None and _named_secret(name, obj[key]) else None


def _random_judge(value: str, _quoted: bool, _literal: bool) -> bool:
    """``secret_value`` for the value of a weak name (``weak_name``): a random run only."""
    return random_value(value.strip())


def _cookie_judge(value: str, quoted: bool, literal: bool) -> bool:
    """``secret_value`` for the value of a name ending in `cookie`: of its cookies' values when it holds some
    (`document.cookie = "theme=dark"` holds no secret)."""
    return _judged_secret("cookie", value) if "=" in value else secret_value(value, quoted, literal)


def _judged_match(kind: str, m: re.Match) -> bool:
    """Whether a judged token rule's match (``_JUDGED_KINDS``) is a secret: its value, and where the rule names what
    the value is of (its group ``n``: a Terraform variable), that name too."""
    return ("n" not in m.re.groupindex or secret_name(m.group("n"))) and _judged_secret(kind, m.group("v"))


def _judged_secret(kind: str, value: str) -> bool:
    """Whether the value a judged token rule found (``_JUDGED_KINDS``) is a secret."""
    if kind == "url_key":
        return random_value(value)
    if kind == "cookie":
        return any(secret_value(v, True, True) for k, _, v in (c.partition("=") for c in value.split(";"))
                   if k.strip().lower() not in _COOKIE_ATTRIBUTES)
    return secret_value(value, True, True)


_COOKIE_ATTRIBUTES = frozenset({"path", "domain", "expires", "max-age", "samesite", "httponly", "secure", "priority"})


def secret_value(value: str, quoted: bool, literal: bool) -> bool:
    """Whether the value of a secret-named thing is a secret. ``quoted``: it was in quotes (a literal);
    ``literal``: where it stands holds literals (a JSON or YAML value, an ``.env`` line, a header, a URL
    query, a command-line option), so an unquoted name there is a value, not a variable."""
    bare = value.strip().rstrip(")]};,")
    if len(bare) < 6 or bare.isdigit() or _PLACEHOLDER.match(bare) or _REFERENCE.match(bare) or _CJK.search(bare):
        return False  # short, a count, a placeholder, a reference, prose (Chinese, Japanese, Korean)
    if bare.lower() in _AUTH_SCHEMES:
        return False  # Authorization: Bearer <token>: the token is the bearer rule's
    if (bare[0] in "/~\\" or bare.startswith(("./", "../")) or re.match(r"^[A-Za-z]:[\\/]", bare)
            or _RELATIVE_FILE.match(bare)) and not any(
                len(part) >= 12 and (_RANDOM_RUN.match(part) or re.search(r"[+=]", part))
                for part in re.split(r"[/\\.]", bare)):
        return False  # a path (PWD=/home/ana, PASSWORD_FILE=/run/secrets/db, credentials/key.json), not a key in one
    if re.match(r"^[a-z][a-z0-9+.-]*://", bare, re.IGNORECASE) and "@" not in bare:
        return False  # a URL without credentials (credentials in one are a rule of their own)
    if not quoted and ("(" in value or "::" in value or "->" in value):
        return False  # a call, a static or a pointer member: token=getToken(), $pw = App::$conf->get(...)
    if _MEMBER.match(bare):
        return False  # a member: data.passwordStrength, config.apiToken
    if quoted or literal:
        return not _VERB_NOUN.match(bare)
    # unquoted in a line of code: a name, a member, a call, an index, a cmdlet is code - but for a run of
    # letters and digits no one would name a variable (an INI file's `passwd = b6563110...`)
    if _IDENTIFIER.match(bare) and not _RANDOM_RUN.match(bare) or _MEMBER.match(bare) or _VERB_NOUN.match(bare):
        return False
    return not any(c in bare for c in "([{")


_AUTH_SCHEMES = frozenset({"bearer", "basic", "digest", "negotiate", "token"})
_PICKS = re.compile(r"(?:\|\||\?\?|\?|:|\bor|\belse|\{|=)\s*$")  # an operator that picks the literal after it
_RELATIVE_FILE = re.compile(r"^[\w.-]+(?:[/\\][\w .-]+)+\.[A-Za-z][A-Za-z0-9]{0,4}$")
# a literal that may be a secret where a name says one is near (a fallback after `||`, a ternary's arms)
_SECRETISH_LITERAL = re.compile(
    r"""(?P<q>\\*['"`])(?P<v>(?=[^'"`\s\\]*\d)(?=[^'"`\s\\]*[A-Za-z])[^'"`\s\\]{8,512})(?P=q)""")


# a quoted value that is never closed: it runs to the end of its line or to another quote (a value cut short, a
# YAML line read without its quoting undone, the end of the JSON string it is in): that is the value, not nothing
_UNCLOSED = r"|(?P<uq>\\*[\"'`])(?P<uv>[^\"'`\r\n]{1,1024})(?=[\r\n\"'`]|$)"
# after a name: a closing quote or bracket (or both: `os.environ["API_KEY"] =`), a separator (`=`, `:`, `=>`, `:=`,
# R's `<-`) between spaces or tabs (also written
# out, `\t`, in JSON text), an opening quote (Python's triple ones too), the value
_AFTER = re.compile(r"(?P<close>\\*[\"'`]\]?|\])?(?:[ \t]|\\+t){0,3}(?P<sep>:=|=>|<-|=|:)(?:[ \t]|\\+t){0,3}"
                    r"(?:(?P<q>(?:\\*\"){3}|(?:\\*'){3}|\\*[\"'`])(?P<qv>[^\"'`\r\n\\]{1,1024}(?:\\.[^\"'`\r\n\\]{0,1024}){0,16})(?P=q)"
                    + _UNCLOSED + r"|(?P<v>[^\s\"'`,;&<>]{1,1024}))")
# after an option: its value as the next argument (`--password hunter2`, `["--api-key", "..."]`)
_FLAG_VALUE = re.compile(r"(?P<close>\\*[\"'])?(?:[ \t]+|[ \t]*,[ \t]*(?=\\*[\"']))"
                         r"(?:(?P<q>\\*[\"'])(?P<qv>[^\"'\r\n\\]{1,1024})(?P=q)" + _UNCLOSED
                         + r"|(?P<v>[^\s\"'`,;&<>|]{1,1024}))")
# what may start a line before a name that is set on it: indentation, a line number, a list or diff mark,
# `export` / `set` / `ENV`
_LINE_HEAD = re.compile(r"(?:[ \t]|\\+t)*(?:\d+\.[ \t]+)?(?:[-+>*][ \t]*)?(?:export[ \t]+|setx?[ \t]+|ENV[ \t]+)?")
_SHELL_DEFAULT = re.compile(r"(?::?[-=]|:)(?P<v>[^}\s]{1,256})\}")  # ${NAME:-default}, Spring's ${NAME:default}
# user:password@ in a URI (also percent-encoded, as VS Code writes remote authorities)
_URI_CREDENTIALS = re.compile(r"(?i)://[^\s:/@'\"<>]{0,128}?(?P<sep>:|%3a)(?P<v>[^\s@/:'\"<>]{1,256}?)(?:@|%40)")
# ... and a token as its user, without a password (`https://<token>@github.com/...`): a random run
_URI_TOKEN = re.compile(r"://(?P<v>[A-Za-z0-9_~+-]{20,256})@")
# a .pgpass line: host:port:database:user:password, on a line of its own (a host: `*`, a name or an address, not
# the hour of a time) (a line break written out too: `\n` in
# JSON); `\:` and `\\` escape within a field
_PGPASS_FIELD = r"(?:[^\s:\\\"']|\\[:\\])+"
_PGPASS = re.compile(r"(?m)(?:^|(?<=\\n)|(?<=[\"']))[ \t]*(?:\*|[\w-]*[A-Za-z.][\w.-]*|\[[0-9A-Fa-f:.]+\])"
                     r":(?:\d{1,5}|\*):"
                     + _PGPASS_FIELD + ":" + _PGPASS_FIELD + ":(?P<v>" + _PGPASS_FIELD
                     + r")[ \t]*(?=\r?$|\\+[rn\"']|[\"'])")
# what the next line holds when a key opens a mapping or a list instead (`password:` then `  type: string`)
_YAML_NESTED = re.compile(r"^(?:-(?:[ \t]|\\[nrt]|$)|[\w.\"'\\-]+[ \t]*:(?:[ \t]|\\[nrt]|$)|[{\[])")
_HEX_FIELDS = re.compile(r"^[0-9A-Fa-f]+(?::[0-9A-Fa-f]+){4}$")
# a YAML key named for a secret whose value is on the next line, more indented (`password:` then `  <value>`), or
# a block scalar's first line (`password: |`); as text and with its line breaks written out (`\n` in JSON)
_YAML_NEXT_LINE = [
    re.compile(r"(?m)^(?P<i>[ \t]*)(?:-[ \t]+)?(?P<n>[\w.-]+)[ \t]*:[ \t]*(?:[|>][+-]?\d?[ \t]*)?(?=\r?\n"
               r"(?P<j>[ \t]+)(?P<v>[^\s#][^\r\n]*))"),
    re.compile(r"(?:^|(?<=\\n)|(?<=[\"']))(?P<i> *)(?:- +)?(?P<n>[\w.-]+) *: *(?:[|>][+-]?\d? *)?"
               r"(?=(?:\\+r)?\\+n(?P<j> +)(?P<v>(?:[^\s\\\"#]|\\[^rn\\])(?:[^\\\"]|\\[^rn\\])*))"),
]
# the credential of an HTTP authorization scheme: RFC 6750's token characters (prose after "bearer" has others)
_BEARER = re.compile(r"(?i:\b(?P<scheme>bearer|basic|token)[ \t]+(?P<v>[A-Za-z0-9._~+/=-]{16,}))")
# What each of _PGPASS and _YAML_NEXT_LINE's matches holds, found with a literal first character (Python's
# engine skips to it): a text without one has no match of theirs and is not searched by them - their lookbehinds
# are tried at every character (2.9 MB of the real samples' texts that may hold a named value: 0.13 and 0.12 s)
_PGPASS_GATE = re.compile(r":(?:\d{1,5}|\*):")
_YAML_GATE = re.compile(r":[ \t]*(?:[|>][+-]?\d?[ \t]*)?(?:\r?\n[ \t]|(?:\\+r)?\\+n )")
# the letters Python's case-insensitive matching equates with ASCII ones (see the screen's parts below)
_ODD_LETTERS = re.compile("[\u0130\u0131\u017f\u212a]")


def _bearers(text: str, low: str):
    """``_BEARER.finditer(text)``, its match tried only where one of its three words starts (``low``: ``text`` in
    lower case, as long): where else ``finditer`` tries it at every character (0.06 s over the 2.9 MB above)."""
    if _ODD_LETTERS.search(text):  # a word may be spelled with one of them: every character
        yield from _BEARER.finditer(text)
        return
    starts = []
    for word in ("bearer", "basic", "token"):
        pos = low.find(word)
        while pos != -1:
            starts.append(pos)
            pos = low.find(word, pos + 1)
    end = 0
    for pos in sorted(starts):  # in order, on after a match's end: finditer's matches
        if pos >= end and (m := _BEARER.match(text, pos)):
            end = m.end()
            yield m


def _named_values(text: str, low: str, hits: list) -> None:
    """Values whose name says they are secret, as (start, -end, kind, value start, value end) in ``hits``."""
    seen: set[int] = set()
    for anchor in _ANCHORS:
        pos = low.find(anchor)
        while pos != -1:
            start = pos
            while start and text[start - 1] in _NAME_CHARS:
                start -= 1
            if start < pos and text[start - 1:start] == "\\" and text[start] in "nrtbf":
                start += 1  # an escape written out (code, JSON, a repr): `\npassword:` is a line break, then a name
            end = pos + len(anchor)
            while end < len(text) and text[end] in _NAME_CHARS and text[end] not in "$":
                end += 1
            pos = low.find(anchor, end)
            if start in seen:
                continue
            seen.add(start)
            name = text[start:end].rstrip(".-")
            end = start + len(name)
            bare = name.lstrip("$-")
            if name.startswith("-D") and bare[1:2].islower():
                bare = bare[1:]  # a Java system property: -Dpassword=..., -Dsigning.key=...
            # the shell's PWD is no secret; ODBC's `;PWD=` is
            weak = not (secret_name(bare) or bare.lower() == "pwd" and text[start - 1:start] == ";")
            if weak and not weak_name(bare):
                continue
            judge = _random_judge if weak else _cookie_judge if bare.lower().endswith("cookie") else secret_value
            if text[max(0, start - 2):start] == "${":  # ${NAME:-default}: the default is a literal
                d = _SHELL_DEFAULT.match(text, end)
                if d and judge(d.group("v"), True, True):
                    hits.append((d.start("v"), -d.end("v"), "secret_value", *d.span("v")))
                continue
            flag = name.startswith("-") and not name.startswith("---")
            m = (_FLAG_VALUE if flag else _AFTER).match(text, end)
            if m is None and flag:
                m = _AFTER.match(text, end)
            if m is None:
                value = _setting_value(text, start, end)
                if value is not None and judge(text[value[0]:value[1]], True, True):
                    hits.append((value[0], -value[1], "secret_value", *value))
                continue
            group = "qv" if m.group("q") is not None else "uv" if m.group("uq") is not None else "v"
            quoted = group != "v"
            if quoted and m.group("close") is None and _closes_literal(text, start, m, group):
                continue
            key = m.group(group)
            vstart, vend = m.span(group)
            trail = _trailing_escapes(key) if group == "v" else 0
            if trail:  # escapes written out end the value (`=s3cret\n`, `=s3cret\"}`): they stay, a quote stays escaped
                key, vend = key[:-trail], vend - trail
            if key.split(" ", 1)[0].lower() in _AUTH_SCHEMES and " " in key:
                continue  # `Bearer <token>`: the token is the bearer rule's
            literal = flag or _literal_place(text, start, name, m, vend)
            if judge(key, quoted, literal):
                hits.append((vstart, -vend, "secret_value", vstart, vend))
            elif not literal and not weak:  # code: a literal the statement falls back on (`config.key || 'abc...'`)
                stop = min((i for i in (text.find(";", vend), text.find("\n", vend)) if i != -1), default=len(text))
                for lit in _SECRETISH_LITERAL.finditer(text, vend, min(stop, vend + 400)):
                    if _PICKS.search(text, max(vend, lit.start() - 12), lit.start()) and \
                            secret_value(lit.group("v"), True, True):
                        hits.append((lit.start("v"), -lit.end("v"), "secret_value", *lit.span("v")))


def _trailing_escapes(value: str) -> int:
    """How many characters of escapes written out (backslashes, `\\n` and the like) end ``value`` - counted from
    its end, not by a pattern (one that splits a run of backslashes every way took seconds on thirty)."""
    i = len(value)
    while i:
        if value[i - 1] == "\\":
            i -= 1
        elif i >= 2 and value[i - 1] in "nrtbf" and value[i - 2] == "\\":
            i -= 2
        else:
            break
    return len(value) - i


# a setting named by one attribute and valued by the next (.NET's appSettings: `<add key="ApiKey" value="..." />`)
_XML_NAME = re.compile(r"(?i:\bkey|\bname)[ \t]*=[ \t]*\\*[\"']$")
_XML_VALUE = re.compile(r"\\*[\"'][ \t]+(?i:value)[ \t]*=[ \t]*(?P<q>\\*[\"'])(?P<qv>[^\"'\r\n\\]{1,1024})(?P=q)")
# an XML element named for a secret (Maven's settings.xml: `<password>...</password>`)
_ELEMENT_VALUE = re.compile(r">(?P<v>[^<\r\n]{1,1024})</")
# ... and by the next line (a Kubernetes manifest's or a workflow's env list: `- name: API_TOKEN` / `value: ...`;
# its line break written out too, in JSON text)
_YAML_NAME = re.compile(r"(?<![\w.$-])name:[ \t]*\\*[\"']?$")
_YAML_VALUE = re.compile(r"\\*[\"']?[ \t]*(?:\r?\n|(?:\\r)?\\n)[ \t]*(?:-[ \t]+)?value:[ \t]*"
                         r"(?:(?P<q>\\*[\"'])(?P<qv>[^\"'\r\n\\]{1,1024})(?P=q)|(?P<v>[^\s\"'`,;&<>\\]{1,1024}))")
# a JSON object that names a setting by one member and values it by the next (`{"name": "DB_PASSWORD", "value": "..."}`:
# a manifest's env or an ECS task's environment as JSON, an HAR file's headers, CloudFormation's parameters, a Postman
# environment), its members on one line or on lines of their own (written out as `\n` in JSON text)
_JSON_NAME = re.compile(r"(?i:\b(?:name|key|parameterkey|variable))\\*\"[ \t]*:[ \t]*\\*\"$")
_JSON_VALUE = re.compile(r"\\*\"[ \t]*,(?:\s|\\+[nrt])*\\*\"(?i:value|parametervalue|default|defaultvalue)\\*\""
                         r"[ \t]*:[ \t]*(?P<q>\\*\")(?P<qv>[^\"\\\r\n]{1,1024})(?P=q)")
# a setting set by a command, its value the next argument (`setx GITHUB_TOKEN ...`, `aws configure set
# aws_secret_access_key ...`, `npm config set //registry.npmjs.org/:_authToken ...`, `git config --global
# github.token ...`)
_SET_COMMAND = re.compile(r"(?:\bsetx|\bconfig(?:ure)?[ \t]+set|\bgit[ \t]+config(?:[ \t]+--?[\w-]+)*"
                          r"|\brclone[ \t]+config[ \t]+(?:create|update)\b[^\r\n]*)[ \t]+"
                          r"(?:[^\s\"']*[/:])?$")
_NEXT_WORD = re.compile(r"[ \t]+(?:(?P<q>\\*[\"'])(?P<qv>[^\"'\r\n\\]{1,1024})(?P=q)|(?P<v>[^\s\"'`;&|<>\\]{1,1024}))")
# a name starting its line, its value quoted after a space and ending the line (Gradle's `storePassword "..."`)
_SPACED_VALUE = re.compile(r"[ \t]+(?P<q>\\*[\"'])(?P<qv>[^\s\"'\\]{1,1024})(?P=q)[ \t]*(?=$|\r?\n|\\+[rn]|//|#)")
# a call's first argument naming a secret, its second the value (`SetEnvironmentVariable("API_KEY", "...")`,
# `os.environ.setdefault("TOKEN", "...")`, `os.getenv("PASSWORD", "...")`)
_CALL_NAME = re.compile(r"[\w$]\([ \t]*\\*[\"']$")  # a call, not a tuple (SQL's `VALUES ('user-auth', '...')`)
_CALL_VALUE = re.compile(r"\\*[\"'][ \t]*,[ \t]*(?P<q>\\*[\"'])(?P<qv>[^\s\"'\\]{1,1024})(?P=q)")  # one word
# an element named by its attribute and valued by its text (`<Setting name="ApiKey">...</Setting>`)
_XML_TEXT = re.compile(r"\\*[\"'][^<>\r\n]{0,200}?>(?P<v>[^<\r\n]{1,1024})</")
# after a quote, code: an operator or a closing bracket (`"Token: " + $token`, `'Token=' } | ForEach-Object`)
_CODE_AFTER = re.compile(r"\s+[-+*/%)\]}|&.,;?:]")


def _setting_value(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Where the value is of a secret name (``text[start:end]``) that no separator follows but that names a
    setting valued elsewhere: the next attribute (`<add key="ApiKey" value="..." />`), the next line (a
    manifest's `- name: API_TOKEN` / `value: ...`), the element it names (`<password>...</password>`) or names by an
    attribute (`<Setting name="ApiKey">...</Setting>`), a call's next argument, a command's next argument (`setx`,
    `config set`, `git config`), a JSON object's next member (`{"name": "DB_PASSWORD", "value": "..."}`), or a quoted
    word after a space ending a line it starts (`storePassword "..."`)."""
    lo = max(0, start - 12)
    if _XML_NAME.search(text, lo, start):
        m = _XML_VALUE.match(text, end) or _XML_TEXT.match(text, end)
    elif _YAML_NAME.search(text, lo, start):
        m = _YAML_VALUE.match(text, end)
    elif _JSON_NAME.search(text, max(0, start - 24), start):
        m = _JSON_VALUE.match(text, end)
    elif text[start - 1:start] == "<":
        m = _ELEMENT_VALUE.match(text, end)
    elif _SET_COMMAND.search(text, max(0, start - 120), start):
        m = _NEXT_WORD.match(text, end)
    else:
        # a call's arguments or a quoted word: a name (`("password", "token")`, Ruby's `secret "db_password"`)
        # unless a random run
        if _CALL_NAME.search(text, lo, start):
            m = _CALL_VALUE.match(text, end)
        elif _starts_line(text, start):
            m = _SPACED_VALUE.match(text, end)
        else:
            return None
        if m is not None and _IDENTIFIER.match(m.group("qv")) and not random_value(m.group("qv")):
            return None
    if m is None:
        return None
    return m.span("qv" if m.groupdict().get("qv") is not None else "v")


def _closes_literal(text: str, start: int, m: re.Match, group: str) -> bool:
    """Whether the quote after a name's separator closes the string the name is in rather than opening its
    value: the name follows that same quote (`"X-Api-Token: " + token`), or code follows it."""
    quote = m.group("q" if group == "qv" else "uq")  # as written: `"`, or `\\"` inside a JSON string
    at = start - len(quote)
    same = at >= 0 and text[at:start] == quote and text[at - 1:at] != "\\"  # the same quote, escaped alike
    return same or _CODE_AFTER.match(m.group(group)) is not None


def _literal_place(text: str, start: int, name: str, m: re.Match, vend: int) -> bool:
    """Whether the value after ``name`` (at ``start``; ``m``: its separator and value) stands where values
    are literals, not code: a quoted key (JSON, YAML, a dict literal), a URL query, a header
    (``X-API-Key: ...``), or a line that sets it (``.env``, YAML, a shell `export`: a name in capitals, or
    a separator with no space before it) and holds nothing after the value."""
    close = m.group("close")
    index = close is not None and len(close) > 1 and close.endswith("]")
    if not index and (close is not None or text[max(0, start - 1):start] in ("?", "&", '"', "'", ";")
                      or text[max(0, start - 2):start] == "/:"):
        return True  # a quoted key (not an index: `os.environ["API_KEY"] = ...` is code), a URL query, a connection
        # string's `;Password=...`, .npmrc's `//host/:_authToken=`
    sep = m.group("sep")
    if sep == ":" and "-" in name.strip("-"):
        return True
    if sep == "=" and m.start("sep") == start + len(name) and (
            name.isupper() and text[start - 1:start] in ("", " ", "\t") or text[start - 1:start] == "="):
        return True  # a shell word that sets it (`docker run -e DB_PASSWORD=...`, `PGPASSWORD=... psql`), an
        # option's value that does (`--from-literal=password=...`)
    if not _starts_line(text, start) or name.startswith("$"):
        return False
    spaced = text[start + len(name):m.start("sep")] != ""
    return (name.isupper() or not spaced or sep == ":") and _line_end(text, vend)


def _starts_line(text: str, start: int) -> bool:
    """Only what may start a line that sets a name (``_LINE_HEAD``: indentation, a list mark, `export`) comes
    before ``start`` on its line (which a line break written out as `\\n` starts too), within 80 characters."""
    written = text.rfind("\\n", 0, start)  # a line break written out (`\\n` in code, JSON, a repr)
    line = max(text.rfind("\n", 0, start) + 1, written + 2 if written != -1 else 0)
    return start - line <= 80 and _LINE_HEAD.fullmatch(text, line, start) is not None


def _line_end(text: str, pos: int) -> bool:
    """Nothing but a comment or white space follows ``pos`` on its line (which a line break written out as
    `\\n` ends too)."""
    nl = min((i for i in (text.find("\n", pos), text.find("\\n", pos)) if i != -1), default=len(text))
    rest = text[pos:nl].strip().rstrip("\\")  # `\\\\n`: a line break written out twice (JSON in JSON)
    return not rest or rest.startswith(("#", "//"))


CACHE_MIN_CHARS = 4096
CACHE_SIZE = 64
_CACHE: dict[str, tuple[str, Counter]] = {}


class Redactor:
    """Replace secrets in text and in parsed JSON; counts what it removed by kind."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __call__(self, text: object):
        if not self.enabled or not isinstance(text, str) or len(text) < 6:
            return text
        if len(text) < CACHE_MIN_CHARS:
            return self._redact(text)
        # large texts recur verbatim (the ~56 KB system prompt of every session and resume, skill
        # files): redact each once per process, and count its secrets every time it recurs
        hit = _CACHE.get(text)
        if hit is None:
            before = Counter(self.counts)
            result = self._redact(text)
            hit = (result, self.counts - before)
            _CACHE[text] = hit
            if len(_CACHE) > CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            return result
        self.counts.update(hit[1])
        return hit[0]

    def structure(self, value: object, depth: int = 0):
        """Parsed JSON with its secrets redacted: every string (keys too) as text, the value of a key that
        names a secret (``{"apiKey": "..."}``, an MCP server's ``env`` and ``headers``), and the item after
        an option that names one in a list (``["--password", "..."]``)."""
        if not self.enabled:
            return value
        if isinstance(value, dict):
            out = {}
            paired = _paired_secret(value)
            for k, v in value.items():
                if isinstance(k, str) and isinstance(v, str) and (k == paired or _named_secret(k, v)):
                    self.counts["secret_value"] += 1
                    out[self(k)] = "[REDACTED:secret_value]"
                else:
                    out[self(k) if isinstance(k, str) else k] = self.structure(v, depth + 1)
            return out
        if isinstance(value, list):
            out = []
            flagged = False
            for item in value:
                if flagged and isinstance(item, str) and secret_value(item, True, True):
                    self.counts["secret_value"] += 1
                    out.append("[REDACTED:secret_value]")
                else:
                    out.append(self.structure(item, depth + 1))
                flagged = isinstance(item, str) and item.startswith("-") and "=" not in item and \
                    len(item) < 64 and secret_name(item.lstrip("-/"))
            return out
        if isinstance(value, str):
            return self(value)
        return value

    def _redact(self, text: str) -> str:
        rules, named = _rules_to_try(text)  # one RE2 pass says which rules could match at all
        if not rules and not named:
            return text
        low = text.lower()
        if len(low) != len(text):  # a few Unicode characters change length in lower case: rule by rule
            low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        hits: list = []
        for kind, rx, anchors in rules:
            for anchor in anchors:
                pos = low.find(anchor)
                while pos != -1:
                    m = rx.match(text, pos)
                    if m and not (kind in _JUDGED_KINDS and not _judged_match(kind, m)):
                        vs, ve = m.span("v") if kind in _VALUE_KINDS else m.span()
                        hits.append((m.start(), -m.end(), kind, vs, ve))
                    pos = low.find(anchor, pos + 1)
        if named:
            _named_values(text, low, hits)
            for m in _URI_CREDENTIALS.finditer(text):
                if secret_value(m.group("v"), True, True):
                    hits.append((m.start("v"), -m.end("v"), "url_password", *m.span("v")))
            for m in _URI_TOKEN.finditer(text):
                if random_value(m.group("v")):
                    hits.append((m.start("v"), -m.end("v"), "url_token", *m.span("v")))
            for m in _PGPASS.finditer(text) if _PGPASS_GATE.search(text) else ():
                # not five fields of hex digits (GitHub's request ids, F194:64102:...)
                if not _HEX_FIELDS.match(m.group().strip()) and secret_value(m.group("v"), True, True):
                    hits.append((m.start("v"), -m.end("v"), "pgpass_password", *m.span("v")))
            for rx in _YAML_NEXT_LINE if _YAML_GATE.search(text) else ():
                for m in rx.finditer(text):
                    value = m.group("v")
                    if (len(m.group("j")) > len(m.group("i")) and secret_name(m.group("n"))
                            and not _YAML_NESTED.match(value) and secret_value(value.rstrip(), True, True)):
                        hits.append((m.start("v"), -m.end("v"), "secret_value", *m.span("v")))
            for m in _bearers(text, low):
                if not _PLACEHOLDER.match(m.group("v")) and not _REFERENCE.match(m.group("v")):
                    hits.append((m.start("v"), -m.end("v"), "bearer_token", *m.span("v")))
        if not hits:
            return text
        # a known token format wins over a named value that overlaps it (GITHUB_TOKEN=ghp_... is a
        # github_token), then earlier and longer matches win; chosen spans never overlap, so kept sorted by
        # start a new one need only be checked against its two neighbours
        hits.sort(key=lambda h: (h[2] in ("secret_value", "url_password", "url_token", "bearer_token"), h[0], h[1]))
        starts: list[int] = []
        chosen: list[tuple] = []
        for start, neg_end, kind, vs, ve in hits:
            end = -neg_end
            i = bisect.bisect_right(starts, start)
            if (i and chosen[i - 1][1] > start) or (i < len(starts) and starts[i] < end):
                continue
            starts.insert(i, start)
            chosen.insert(i, (start, end, kind, vs, ve))
        out, last = [], 0
        for _start, _end, kind, vs, ve in chosen:
            self.counts[kind] += 1
            out.append(text[last:vs])
            out.append(f"[REDACTED:{kind}]")
            last = ve
        out.append(text[last:])
        return "".join(out)


# ------------------------------------------------------------------------------------------ the screen
# Every rule relaxed to a superset that RE2 runs in one linear pass: no word boundaries or upper bounds,
# quotes and tabs possibly escaped (JSON inside JSON), any whitespace around `=`. Over a raw JSON line it
# matches every line holding a string the rules could change, however the writer escaped it: a \uXXXX
# escape of a printable character or an escaped `/` could hide anything, and so could the four non-ASCII
# letters Python's case-insensitive matching equates with ASCII ones (İ ı ſ K); those send a line or text
# through every rule. tests/test_redact.py checks the screen against the rules. Each entry: (pattern, the
# token kinds it screens for; () = the named values; None = every rule).
_ESC_WS = r"(?:[ \t\r\n]|\\+[tnr])*"
_ESC_Q = r"(?:\\*[\"'`]\]?|\])?"
_RUN = r"[!#$%*+\-./0-9:<=>?@A-Z\[\]^_`a-z{|}~)]"  # what a secret's characters may be, but `(` and quotes
# an unquoted value (secret_value: at least six characters once `)]}` are stripped off its end, not all digits) of
# run characters ending where it surely ends, or one reaching what could hide anything. Its last kept character
# is a letter or sign (N_OPEN), or a digit with a letter or sign (N) before it, at any place: both regardless of
# how many characters the value holds, five before or more. Neither a JSON number (`"inputTokens":266662`) nor a
# count with a brace after it (`"responseTokenLimit":68000}`) flags its line
_N = r"[!#$%*+\-./:<=>?@A-Z\[\]^_`a-z{|}~)]"  # _RUN but the digits
_N_OPEN = r"[!#$%*+\-./:<=>?@A-Z\[^_`a-z{|~]"  # ... and but the closers
_KEPT = ("(?:" + _RUN * 5 + _RUN + "*" + _N_OPEN + "|(?:" + "|".join(
    _RUN * i + _N + _RUN * (4 - i) for i in range(4)) + "|" + _RUN * 4 + _RUN + "*" + _N + ")" + _RUN + "*[0-9])")
_VALUE_RUN = "(?:" + _RUN + r"*(?:[^ -~\t\r\n]|\\)|" + _KEPT + _RUN + r"*(?:[ \t\r\n\"'`,;&<>]|$))"
# a quoted value: six characters before its closing quote, or reaching an escape (which could hide a quote)
_QUOTED_VALUE = r"(?:\\*[\"'`]){1,3}(?:[^\"'`\r\n\\]{6}|[^\"'`\r\n\\]*\\)"
_SCREEN_PARTS: list[tuple[str, tuple[str, ...] | None]] = [
    (r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY", ("private_key",)),
    (r"gh[pousr]_[A-Za-z0-9]{36}", ("github_token",)),
    (r"github_pat_[A-Za-z0-9_]{22}", ("github_pat",)),
    (r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}", ("aws_access_key",)),
    (r"xox[abposr]-|xapp-\d-", ("slack_token",)),
    (r"https://hooks\.slack\.com/", ("slack_webhook",)),
    (r"discord(?:app)?\.com/api/webhooks/", ("discord_webhook",)),
    (r"eyJ[A-Za-z0-9_-]{8,}\.eyJ", ("jwt",)),
    (r"T3BlbkFJ", ("openai_key",)),
    (r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40}", ("openai_key",)),
    (r"hf_[A-Za-z0-9]{34}", ("huggingface_token",)),
    (r"gl(?:pat|dt|rt|ptt|ft|imt|agent|oas|cbt|soat)-[A-Za-z0-9_-]{20}", ("gitlab_token",)),
    (r"GOCSPX-[A-Za-z0-9_-]{24}", ("google_oauth_secret",)),
    (r"sk-ant-[A-Za-z0-9_-]{20}", ("anthropic_key",)),
    (r"AIza[0-9A-Za-z_-]{35}", ("google_api_key",)),
    (r"[sr]k_(?:live|test)_[A-Za-z0-9]{16}", ("stripe_key",)),
    (r"npm_[A-Za-z0-9]{36}", ("npm_token",)),
    (r"pypi-AgEIcHlwaS5vcmc", ("pypi_token",)),
    (r"SG\.[A-Za-z0-9_-]{22}\.", ("sendgrid_key",)),
    (r"SK[0-9a-fA-F]{32}", ("twilio_key",)),
    # from its first dot: `[MNO][A-Za-z\d_-]{23,27}` counted from every M, N or O of a line, and RE2's DFA
    # tracked each start as a state of its own and fell back to its slow search (the whole screen of the real
    # samples' long lines went 17x slower with it); the rule checks the rest
    (r"\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27}", ("discord_token",)),
    (r"\d{8,10}:AA[A-Za-z0-9_-]{33}", ("telegram_bot_token",)),
    (r"do[opr]_v1_[a-f0-9]{64}", ("digitalocean_token",)),
    (r"dckr_pat_", ("docker_token",)),
    (r"hv[sb]\.[A-Za-z0-9_-]{24}", ("vault_token",)),
    (r"dapi[a-f0-9]{32}", ("databricks_token",)),
    (r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shopify_token",)),
    (r"lin_api_[A-Za-z0-9]{40}", ("linear_key",)),
    (r"dp\.(?:pt|st|sa|ct|scim|audit)\.", ("doppler_token",)),
    (r"ATATT3", ("atlassian_token",)),
    (r"gl(?:sa|c)_[A-Za-z0-9_+/=-]{32}", ("grafana_token",)),
    (r"NRAK-[A-Z0-9]{27}", ("newrelic_key",)),
    (r"PMAK-[a-f0-9]{24}", ("postman_key",)),
    (r"AGE-SECRET-KEY-1", ("age_secret_key",)),
    (r"(?i:accountkey|sharedaccesskey)[ \t]*=", ("azure_storage_key",)),
    (r"[?&]sig=", ("azure_sas",)),
    (r"(?:-[uU]|--user|--http-user|--proxy-user)(?:[ \t]+|=)(?:\\*[\"'])?[^\s:\"'@\\]+:[^\s\"'@\\]{4}",
     ("cli_credentials",)),
    *((screen, (kind,)) for kind, _pattern, _anchors, screen in _PREFIXED),
    # the commands' names, and no more: a part that spans the line to its option (`mysql[^\r\n]*[ \t]-p`) keeps a
    # state of its own in RE2's DFA while the rest of the line is read, and twenty such parts multiplied its states
    # past any budget (the real samples' screen 0.12 -> 1.0 s); the rules look for the option
    (r"sshpass[ \t]|(?:mysql|mariadb)[\w-]*[ \t]|(?:docker|podman|nerdctl|buildah|skopeo|oras|registry|az)[ \t]+login"
     r"|-pass(?:in|out)?[ \t]+pass:|htpasswd[ \t]|ssh-keygen[ \t]|secret[ \t]+set[ \t]|twine[ \t]+upload"
     r"|mongo(?:sh|dump|restore|export|import|stat|top)?[ \t]|redis-cli[ \t]|(?:sqlcmd|bcp)[ \t]"
     r"|nuget[ \t]+(?:push|add|update)|(?:smbclient|rpcclient|smbget)[ \t]|net[ \t]+(?:use|user)[ \t]"
     r"|(?:cargo|vault)[ \t]+login[ \t]|(?i:convertto-securestring)[ \t]|ldap[a-z]+[ \t]|psexec"
     r"|ssm[ \t]+put-parameter|nmcli|wpa_passphrase|user-secrets[ \t]+set|requirepass|masterauth|rabbitmq(?:ctl|admin)"
     r"|doctl[ \t]+auth|mc[ \t]+(?:alias|config)[ \t]|<<<|\|[ \t]*(?:sudo|kinit)[ \t]|--password-stdin|--with-token"
     r"|variable[ \t]+\\*\"|gcloud[ \t]+secrets|(?:poetry|composer)[ \t]+config|bundle[ \t]+config"
     r"|openssl[ \t]|chpasswd|lftp|p4[ \t]|(?:7z[az]?|rar)[ \t]|(?:un)?zip[ \t]+-|cqlsh"
     r"|(?:sqlplus|sqlldr|expdp|impdp|rman|dgmgrl)[ \t]", ("command_secret",)),
    (r"(?i:password|identified[ \t]+by)[ \t]*=?[ \t]*(?i:password[ \t]*)?\(?[ \t]*\\*'[^'\\\r\n]", ("sql_password",)),
    (r"machine[ \t]+[^\s\\]+(?:\s|\\+[rn])+login[ \t]+[^\s\\]+(?:\s|\\+[rn])+password[ \t]", ("netrc_password",)),
    (r"auth[ \t]*=[ \t]*\(|HTTP(?:Basic|Digest)Auth\(|NetworkCredential(?:\]::new)?\(|\.login\(|jwt\.(?:en|de)code\("
     r"|hmac\.new\(|Fernet\(|\([ \t]*\\*[\"'][\w.$-]*" + _SECRET_RUN + r"[\w.$-]*\\*[\"'][ \t]*,",
     ("code_credentials",)),
    (r"(?i:cookie)[ \t]*:[ \t]*[^\r\n\"'\\]*=", ("cookie",)),
    (r"[?&](?:key|appid)=[A-Za-z0-9_%.~+/-]{16}", ("url_key",)),
    # named values: a secret word in a name, then (a closing quote and) a separator or, for an option, the
    # next argument, then a value that could be a secret: a quoted one (_QUOTED_VALUE: spaces and brackets
    # and all), or a run of characters that are no code's (no `(`: `auth = refresh(session)` does not flag
    # its line) ending where the value surely ends, or reaching a backslash (an escape) or a character
    # outside printable ASCII, which could hide anything.
    # Repetitions are unbounded (`*`), not counted: a counted one is copied into RE2's program that many
    # times, and one of 120 ran its DFA out of memory
    (_SECRET_RUN + r"[\w.$-]*" + _ESC_Q + _ESC_WS + r"(?:[:=]|:=|=>|<-)" + _ESC_WS
     + r"(?:(?:\\*[\"'`]){0,3}" + _VALUE_RUN + "|" + _QUOTED_VALUE + ")", ()),
    # an option starts a name (what is before it is no name's character; in a JSON line, an escape may be)
    (r"(?:^|[^\w.$-]|\\[bfnrt]|\\u[0-9a-fA-F]{4})-[\w-]*" + _SECRET_RUN + r"[\w-]*" + _ESC_Q
     + r"(?:[ \t]+|[ \t]*,[ \t]*)"
     + r"(?:(?:\\*[\"'])?" + _VALUE_RUN + "|" + _QUOTED_VALUE + ")", ()),
    # a setting named by one key and valued by the next on its line or the next (`<add key="ApiKey" value="..."/>`,
    # `- name: API_TOKEN` / `value: ...`)
    (_SECRET_RUN + r"[\w.$-]*" + _ESC_Q + _ESC_WS + r"(?:-[ \t]+)?(?i:value)[ \t]*[:=]", ()),
    # a setting named by one attribute and valued by the next (`<add key="ApiKey" value="..." />`)
    (r"(?i:key|name)[ \t]*=[ \t]*\\*[\"'][^\"'\r\n]*" + _SECRET_RUN + r"[^\"'\r\n]*[\"'][ \t]+(?i:value)[ \t]*=", ()),
    # an XML element named for a secret (`<password>...</password>`)
    (r"<[\w.$-]*" + _SECRET_RUN + r"[\w.$-]*>[^<\r\n]{6}", ()),
    # ... by its text (`<Setting name="ApiKey">...</Setting>`)
    (r"(?i:key|name)[ \t]*=[ \t]*\\*[\"'][^\"'\r\n]*" + _SECRET_RUN + r"[^\"'\r\n]*[\"'][^<>\r\n]*>[^<\r\n]{6}", ()),
    # a command that sets a setting, its value the next argument (`setx TOKEN ...`, `aws configure set ...`)
    (r"(?:setx|config[ \t]+set|configure[ \t]+set|git[ \t]+config|rclone[ \t]+config)[^\r\n]*" + _SECRET_RUN
     + r"[\w.$-]*[ \t]+\S", ()),
    # a quoted word after a name and a space (`storePassword "..."`), a call's name and value (`("API_KEY", "...")`)
    (_SECRET_RUN + r"[\w.$-]*[ \t]+\\*[\"'][^\s\"'\\]{6}", ()),
    (r"\([ \t]*\\*[\"'][\w.$-]*" + _SECRET_RUN + r"[\w.$-]*\\*[\"'][ \t]*,[ \t]*\\*[\"'][^\s\"'\\]{6}", ()),
    # a token as a URL's user (`https://<token>@github.com/...`)
    (r"://[A-Za-z0-9_~+-]{20}[A-Za-z0-9_~+-]*@", ()),
    # a JSON object's name member naming a secret, its value member next (`{"name": "DB_PASSWORD", "value": ...}`)
    (r"(?i:name|key|variable)\\*\"[ \t]*:[ \t]*\\*\"[\w.$-]*" + _SECRET_RUN
     + r"[\w.$-]*\\*\"[ \t]*,(?:\s|\\+[nrt])*\\*\"(?i:value|parametervalue|default|defaultvalue)\\*\"", ()),
    # a shell default after a secret name (`${DB_PASSWORD:-...}`): the default is a literal, whatever it holds
    (r"\$\{[\w.$-]*" + _SECRET_RUN + r"[\w.$-]*(?::?[-=]|:)[^}\s]{6}", ()),
    # a JSON key holding a secret word (Redactor.structure judges the whole key) with a string value, and a
    # JSON list item that starts with `-` and holds one
    (_SECRET_RUN + r'(?:[^"\\\n]|\\.)*"' + _ESC_WS + r":" + _ESC_WS + r'"(?:[^"\n]|\\.)', ()),
    (r'"-(?:[^"\\\n]|\\.)*' + _SECRET_RUN + r'(?:[^"\\\n]|\\.)*"' + _ESC_WS + r"," + _ESC_WS + '"', ()),
    (r"://[^\s/@'\"<>]*(?::|%3[aA])[^\s/@'\"<>]+(?:@|%40)", ()),
    (r"(?i:bearer|basic|token)(?:[ \t]|\\+t)+[A-Za-z0-9._~+/=\\-]{16}", ()),
    # a .pgpass line; a secret-named YAML key whose value is on the next line (_PGPASS, _YAML_NEXT_LINE)
    (r":(?:\d|\*)[0-9]*:[^\s:\"']+:[^\s:\"']+:[^\s:\"']{6}", ()),
    (_SECRET_RUN + r"[\w.-]*[ \t]*:[ \t]*(?:[|>][+-]?\d?[ \t]*)?(?:\r?\n|(?:\\+r)?\\+n)[ \t]", ()),
    (r"\\u(?:[1-9a-fA-F][0-9a-fA-F]{3}|0[1-9a-fA-F][0-9a-fA-F]{2}|00[2-9a-fA-F][0-9a-fA-F])", None),
    (r"\\/", None),
    ("\u0130|\u0131|\u017f|\u212a", None),  # İ ı ſ K
]
LINE_SCREEN = "|".join(p for p, _kinds in _SCREEN_PARTS)

_SCREENS: dict[str, object] = {}
_TEXT_SCREEN: list = []  # [RE2 set of the parts, the token rules each part screens for, whether it screens names]


def _rules_to_try(text: str) -> tuple[list[tuple], bool]:
    """The token rules whose screen matches ``text``, and whether named values may be there (one RE2 pass
    over it for all of them)."""
    if not _TEXT_SCREEN:
        screen = re2.Set.SearchSet(_re2_options())
        for pattern, _kinds in _SCREEN_PARTS:
            screen.Add(pattern)
        screen.Compile()
        by_kind: dict[str, list[int]] = {}
        for i, (kind, _pattern, _anchors) in enumerate(_TOKENS):  # a kind may have several rules (two OpenAI keys)
            by_kind.setdefault(kind, []).append(i)
        _TEXT_SCREEN[:] = [screen, [range(len(_TOKENS)) if kinds is None else [i for k in kinds for i in by_kind[k]]
                                    for _p, kinds in _SCREEN_PARTS],
                           [kinds is None or kinds == () for _p, kinds in _SCREEN_PARTS]]
    screen, rules, names = _TEXT_SCREEN
    found = screen.Match(text)
    if not found:
        return [], False
    named = any(names[i] for i in found)
    wanted = {rule for i in found for rule in rules[i]}
    compiled = _compiled()
    return [compiled[i] for i in sorted(wanted)], named  # in declared order


def screen(pattern: str = LINE_SCREEN):
    """The RE2 search function of a screen pattern over bytes, compiled once per process."""
    compiled = _SCREENS.get(pattern)
    if compiled is None:
        # Latin-1: one byte is one character, so a byte that is not valid UTF-8 (which the reader
        # decodes as U+FFFD, a character a value may hold) counts as outside printable ASCII;
        # the non-ASCII literals above match as their UTF-8 bytes
        options = _re2_options()
        options.encoding = re2.Options.Encoding.LATIN1
        compiled = _SCREENS[pattern] = re2.compile(pattern.encode(), options)
    return compiled.search


def _re2_options() -> re2.Options:
    """RE2's options for the screens: 64 MB for the program and the DFA its search builds as it goes (the default
    8 MB ran out on lines of the real samples, and RE2 then searches more slowly and writes `DFA out of memory` on
    the user's terminal: 36 times in an ingest of the real samples, 0 with 32 MB); its errors not logged (an
    out-of-memory DFA falls back to an exact, slower search). What fills the DFA is a part that spans a line
    (`mysql[^\r\n]*[ \t]-p`): each keeps a state of its own while the rest of the line is read, and twenty of them
    took the real samples' screen from 0.12 to 1.0 s; the parts name what starts a match and the rules do the rest."""
    options = re2.Options()
    options.max_mem = 64 << 20
    options.log_errors = False
    return options


def screen_lines(data: bytes, line_starts: list[int], pattern: str = LINE_SCREEN) -> set[int]:
    """The indexes of the lines of ``data`` (starting at ``line_starts``) that a match of ``pattern``
    (by default: a possible secret) touches. One RE2 search per such line, none for the others."""
    search, hit = screen(pattern), set()
    pos, n = 0, len(data)
    while pos < n:
        m = search(data, pos)
        if m is None:
            break
        first = bisect.bisect_right(line_starts, m.start()) - 1
        last = bisect.bisect_right(line_starts, max(m.end() - 1, m.start())) - 1
        hit.update(range(first, last + 1))
        pos = line_starts[last + 1] if last + 1 < len(line_starts) else n  # on with the next line
    return hit


def literal_lines(data: bytes, line_starts: list[int], literals: tuple[bytes, ...]) -> set[int]:
    """The indexes of the lines of ``data`` (starting at ``line_starts``) that hold one of ``literals``
    (single-line byte strings): ``screen_lines`` of their alternation, by bytes.find, which passes over
    bytes several times faster than RE2's DFA steps through them."""
    hit: set[int] = set()
    n = len(line_starts)
    for literal in literals:
        pos = data.find(literal)
        while pos != -1:
            line = bisect.bisect_right(line_starts, pos) - 1
            hit.add(line)
            pos = data.find(literal, line_starts[line + 1]) if line + 1 < n else -1
    return hit


_PATHS: dict[tuple[str, bool], str] = {}
PATHS_HELD = 100_000  # paths stored_path remembers


def _valid(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def stored_path(path: str, enabled: bool = True) -> str:
    """A path (or id) as it is stored: redacted (a token can hide in a folder or file name), and a
    name that is not valid UTF-8 with U+FFFD. The same path gives the same text in every run, so it
    keys the bookkeeping as the raw path would. Not counted as a redaction."""
    out = _PATHS.get((path, enabled))
    if out is None:
        text = _valid(path)
        out = Redactor()(text) if enabled else text
        if len(_PATHS) > PATHS_HELD:
            _PATHS.clear()
        _PATHS[path, enabled] = out
    return out


def store_paths(paths: list[str], enabled: bool = True) -> None:
    """What ``stored_path`` gives for each of many paths, worked out at once: one RE2 scan of them all (the
    line screen) finds the few a rule may touch, and only those go through the rules - the others are stored
    as they are, as a text on a line the screen clears is (see ``extract.events.read_event_log``). A run's
    planning stores every source's path (10,593 on the 1 GB bench corpus: 0.15 s one by one)."""
    todo = [p for p in dict.fromkeys(paths) if (p, enabled) not in _PATHS][:PATHS_HELD - len(_PATHS)]
    texts = [_valid(p) for p in todo]
    if not enabled:
        _PATHS.update(((p, False), t) for p, t in zip(todo, texts, strict=True))
        return
    encoded = [t.encode("utf-8") for t in texts]
    starts, pos = [], 0
    for b in encoded:
        starts.append(pos)
        pos += len(b) + 1
    flagged = screen_lines(b"\n".join(encoded), starts)
    redactor = Redactor()
    _PATHS.update(((p, True), redactor(t) if i in flagged else t) for i, (p, t) in enumerate(zip(todo, texts,
                                                                                                 strict=True)))
