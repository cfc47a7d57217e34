# Wrapper scripts: written below.
