import os

import six

print(f"{os.environ.get('GREETING', 'hello')} from the ringleader test image (six {six.__version__})")
