# The checkout's own venv with the test extra, the export extra (the CPU torch wheel, so
# that the export tests run, not skip) and httptools (serve's framing tests under uvicorn's
# second parser).
python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]'
pip install torch==2.13.0 -e '.[test,export]' httptools
