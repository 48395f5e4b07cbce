# syntax=docker/dockerfile:1
# The replimon image: the CLI with PySpark and a Java runtime. docker-compose.yml runs it as the
# monitoring job (`replimon run`) and as the simulator (`replimon simulate --kafka`); see
# docs/docker.md. Never built on the development machines (no Docker engine there).
FROM python:3.11-slim-bookworm

# Spark 4 runs on Java 17 or 21; bookworm packages 17 (trixie, the newer slim default, does
# not). procps gives `ps`, which Spark's launch scripts call.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*

# PYSPARK_PYTHON: the Python workers Spark forks must be the interpreter replimon is installed in.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_DRIVER_PYTHON=/usr/local/bin/python

# Dependencies first: pyproject.toml's list, pinned by constraints.txt. This layer (PySpark alone
# is some 400 MB) is rebuilt only when one of those two files changes, not on every source edit.
WORKDIR /src
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && pip install --no-cache-dir -c constraints.txt -r requirements.txt

# The project itself, without the dev extras; its dependencies are all satisfied above.
COPY README.md setup.py ./
COPY replimon ./replimon
COPY producers ./producers
COPY streaming ./streaming
COPY dashboards ./dashboards
RUN pip install --no-cache-dir -c constraints.txt . \
 && rm -rf build ./*.egg-info

# A user without privileges, numeric in USER so that orchestrators can check it is not root
# (Kubernetes' runAsNonRoot needs a number). It writes only to /var/lib/replimon (paths.data_dir and
# paths.checkpoint_dir of conf/docker.yaml; docker-compose mounts a volume on the checkpoints,
# which takes this ownership when Docker creates it) and to the Ivy cache below.
RUN groupadd --system --gid 10001 replimon \
 && useradd --system --create-home --uid 10001 --gid 10001 replimon \
 && mkdir -p /var/lib/replimon/data /var/lib/replimon/checkpoints /opt/replimon/ivy \
 && chown -R replimon:replimon /var/lib/replimon /opt/replimon

WORKDIR /app
COPY conf ./conf
USER 10001:10001

# Resolve streaming.spark_conf's spark.jars.packages (Spark's Kafka connector and the Kafka
# client) into spark.jars.ivy now, through the same session code the job uses: a container then
# finds the jars in that cache instead of downloading them at each start, and a wrong coordinate
# fails the build, not the demo.
RUN python -c "from replimon.config import load_settings; from replimon.streaming.session import get_session; s = load_settings('conf/docker.yaml'); get_session(s.streaming.master, 1, **s.streaming.spark_conf).stop()"

ENTRYPOINT ["replimon"]
CMD ["--help"]
