import sys

from .cli import main
from .processes import exit_without_collecting

exit_without_collecting()
sys.exit(main())
